"""opshift inspect: activation table, slope broadcast classes, effective defaults, defects,
convert dry run, and the command line."""

from __future__ import annotations

import json

import numpy as np
import onnx
import onnx.defs
import pytest
from conftest import make_model
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import opshift
from opshift.broadcast import SlopeClass
from opshift.cli import main
from opshift.inspect import inspect
from opshift.inspect.report import CLASS_TEXT

vi = h.make_tensor_value_info


def _slopes_model(opset=13):
    """Four PRelus on X [2,3,4,5], one per broadcast class, plus LeakyRelu and Selu."""
    slopes = {"shared": np.array([0.5], np.float32),
              "axis1": np.ones((3, 1, 1), np.float32),
              "last": np.ones(5, np.float32),
              "elem": np.ones((4, 5), np.float32)}
    nodes = [h.make_node("PRelu", ["x", f"s_{k}"], [f"y_{k}"], name=f"p_{k}") for k in slopes]
    nodes.append(h.make_node("LeakyRelu", ["x"], ["lr"], name="lr", alpha=0.5))
    nodes.append(h.make_node("Selu", ["x"], ["se"], name="se"))
    outs = [vi(f"y_{k}", T.FLOAT, [2, 3, 4, 5]) for k in slopes]
    outs += [vi("lr", T.FLOAT, [2, 3, 4, 5]), vi("se", T.FLOAT, [2, 3, 4, 5])]
    return make_model(nodes, [vi("x", T.FLOAT, [2, 3, 4, 5])], outs, opset=opset,
                      initializers=[nh.from_array(v, f"s_{k}") for k, v in slopes.items()])


def _schema_default(op, version, attr):
    return onnx.defs.get_schema(op, version).attributes[attr].default_value.f


def test_broadcast_classes_and_attributes():
    r = inspect(_slopes_model())
    rows = {row.node: row for row in r.rows}
    assert rows["p_shared"].slope_class == CLASS_TEXT[SlopeClass.SHARED] == "shared"
    assert rows["p_axis1"].slope_class.startswith("per-channel axis 1")
    assert "NCX" in rows["p_axis1"].slope_class
    assert rows["p_last"].slope_class == "per-channel last axis (oneDNN NXC)"
    assert rows["p_elem"].slope_class == "elementwise"
    assert {row.version for k, row in rows.items() if k.startswith("p_")} == {9}
    assert rows["p_axis1"].dtype == "float" and rows["p_axis1"].scope == "graph 'g'"
    lr = {a.name: a for a in rows["lr"].attributes}
    assert lr["alpha"].value == pytest.approx(0.5) and not lr["alpha"].default
    assert r.node_count == 6 and r.opsets == {"": 13} and r.ir_version == 7
    assert not r.defects["changes"]


def test_legacy_prelu_1d_slope_is_per_channel_axis1():
    n = h.make_node("PRelu", ["x", "s"], ["y"], name="p")
    m = make_model([n], [vi("x", T.FLOAT, [2, 3, 4])], [vi("y", T.FLOAT, [2, 3, 4])], opset=6,
                   initializers=[nh.from_array(np.ones(3, np.float32), "s")], ir_version=4)
    row = inspect(m).rows[0]
    assert row.version == 6 and row.slope_class.startswith("per-channel axis 1")


@pytest.mark.parametrize("opset,version", [(5, 1), (6, 6)])
def test_selu_effective_defaults(opset, version):
    m = make_model([h.make_node("Selu", ["x"], ["y"], name="s")], [vi("x", T.FLOAT, [3])],
                   [vi("y", T.FLOAT, [3])], opset=opset)
    row = inspect(m).rows[0]
    assert row.version == version
    attrs = {a.name: a for a in row.attributes}
    for name in ("alpha", "gamma"):
        assert attrs[name].default
        assert np.float32(attrs[name].value) == np.float32(_schema_default("Selu", version,
                                                                          name))
    # Selu-1 and Selu-6 defaults really differ, so the table must show the right one
    assert _schema_default("Selu", 1, "alpha") != _schema_default("Selu", 6, "alpha")
    assert "(default)" in inspect(m).table()


def test_defects_listed_and_input_untouched():
    n = h.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=2)
    n.attribute.append(h.make_attribute("consumed_inputs", [0]))
    m = make_model([n], [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])], opset=9)
    before = m.SerializeToString()
    r = opshift.inspect(m)
    assert m.SerializeToString() == before
    assert sorted(c["kind"] for c in r.defects["changes"]) == ["attribute_type",
                                                               "consumed_inputs"]
    attrs = {a.name: a for a in r.rows[0].attributes}
    assert not attrs["alpha"].valid and not attrs["consumed_inputs"].valid
    text = r.table()
    assert "would fix" in text and "INVALID" in text


def test_function_scope_row():
    body = [h.make_node("Selu", ["a"], ["b"], name="fs", gamma=2.0)]
    f = h.make_function("local", "F", ["a"], ["b"], body, [h.make_opsetid("", 6)])
    m = make_model([h.make_node("F", ["x"], ["y"], domain="local", name="call")],
                   [vi("x", T.FLOAT, [3])], [vi("y", T.FLOAT, [3])], opset=6, functions=[f],
                   extra_opsets=[h.make_opsetid("local", 1)], ir_version=8)
    r = inspect(m)
    assert [(row.node, row.scope, row.version) for row in r.rows] == [
        ("fs", "function local::F", 6)]
    assert r.functions == ["local::F"] and r.node_count == 2


def test_convert_dry_run_per_node():
    m = _slopes_model(opset=13)
    before = m.SerializeToString()
    r = inspect(m, opset=16)
    assert m.SerializeToString() == before
    rows = {row.node: row for row in r.rows}
    assert rows["p_last"].at_target.startswith("PRelu-16")
    assert rows["se"].at_target == "Selu-6 (unchanged)"
    assert r.conversion is not None and "error" not in r.conversion
    assert r.conversion["target_opset"] == 16
    # going down across PRelu 6/7: a [3,1,1] slope is per channel under both rules, and [5]
    # on a last axis of 5 (X's axis 1 is 3) reads the same under both: nothing changes
    r6 = inspect(m, opset=6)
    rows6 = {row.node: row for row in r6.rows}
    assert r6.conversion["changes"] == []
    assert rows6["p_axis1"].at_target == rows6["p_last"].at_target == "PRelu-6"
    assert "convert to opset 6 (dry run)" in r6.table()


def test_cli_table_and_json(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(_slopes_model(), src)
    data = src.read_bytes()
    assert main(["inspect", str(src), "--all"]) == 0
    text = capsys.readouterr().out
    assert "p_axis1" in text and "[5]: per-channel last axis" in text
    assert "IR version 7; opsets: ai.onnx 13; 6 nodes" in text
    assert max(map(len, text.splitlines())) <= 100
    assert main(["inspect", str(src)]) == 0  # the summary: grouped, no node names
    text = capsys.readouterr().out
    assert "p_axis1" not in text and "PRelu 4, LeakyRelu 1, Selu 1" in text
    assert "per-channel last axis (oneDNN NXC)" in text
    assert main(["inspect", str(src), "--json", "--opset", "16"]) == 0
    d = json.loads(capsys.readouterr().out)
    d = d["details"]
    assert [a["node"] for a in d["activations"]][:4] == ["p_shared", "p_axis1", "p_last",
                                                         "p_elem"]
    assert d["activations"][0]["slope_class"] == "shared"
    assert d["activations"][5]["attributes"]["alpha"]["default"] is True
    assert d["target_opset"] == 16 and d["opsets"] == {"ai.onnx": 13}
    assert src.read_bytes() == data and sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_cli_bad_opset(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    onnx.save(_slopes_model(), src)
    assert main(["inspect", str(src), "--opset", "99"]) == 2
    assert "outside" in capsys.readouterr().err


def test_prelu_rows_in_a_function_and_through_inference():
    """A slope held by a Constant node in a function body is read per body (its value_floats
    form too); X's shape inside a function is not guessed. In the main graph X's shape comes
    from shape inference where nothing declares it, and PRelus judged alike share nothing
    mutable."""
    body = [h.make_node("Constant", [], ["s"], value_floats=[0.5, 0.25, 0.125]),
            h.make_node("PRelu", ["a", "s"], ["b"], name="fp")]
    f = h.make_function("local", "F", ["a"], ["b"], body, [h.make_opsetid("", 13)])
    slope = nh.from_array(np.full((3, 1), 0.5, np.float32), "slope")
    nodes = [h.make_node("Identity", ["x"], ["t"]),  # t: no value_info
             h.make_node("PRelu", ["t", "slope"], ["p1"], name="p1"),
             h.make_node("PRelu", ["t", "slope"], ["p2"], name="p2"),
             h.make_node("F", ["p2"], ["y"], domain="local", name="call")]
    m = make_model(nodes, [vi("x", T.FLOAT, [2, 3, 4])],
                   [vi("p1", T.FLOAT, [2, 3, 4]), vi("y", T.FLOAT, [2, 3, 4])], opset=13,
                   functions=[f], initializers=[slope],
                   extra_opsets=[h.make_opsetid("local", 1)], ir_version=8)
    rows = {row.node: row for row in inspect(m).rows}
    assert rows["fp"].slope_shape == [3] and rows["fp"].x_shape is None
    assert rows["fp"].slope_class.startswith("unknown (inside a function")
    assert rows["p1"].x_shape == [2, 3, 4] and rows["p1"].slope_shape == [3, 1]
    assert rows["p1"].slope_class.startswith("per-channel axis 1")
    assert rows["p1"].attributes is not rows["p2"].attributes
    assert rows["p1"].to_dict()["slope_class"] == rows["p2"].slope_class
