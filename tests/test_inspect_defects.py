"""inspect, the command a user runs first, lists what ``fix`` would do with a model's
defects (a PRelu slope only a per-channel reading fits, a domain without opset import)
instead of refusing the model; a slope no reading fits stays a one-line error, exit 2, for
every command."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from conftest import digest, make_model, vi
from onnx import helper, numpy_helper

from opshift.check import structure
from opshift.cli import main


def _prelu(slope_shape, x_shape=(1, 3, 4, 4), opset=13) -> onnx.ModelProto:
    n = int(np.prod(slope_shape))
    slope = numpy_helper.from_array(
        np.linspace(0.1, 0.5, n, dtype=np.float32).reshape(slope_shape), "slope")
    return make_model([helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")],
                      [vi("x", shape=x_shape)], [vi("y", shape=x_shape)], opset=opset,
                      initializers=[slope])


def _kinds(m: onnx.ModelProto) -> list[str]:
    return [k for k, _ in structure.problems(m) if k in (structure.SLOPE, structure.UNFIT_SLOPE)]


@pytest.mark.parametrize("slope, x, opset, kind", [
    ((3,), (1, 3, 4, 4), 13, structure.SLOPE),  # per channel fits: fix reshapes it
    ((3,), (1, 3, 4, "W"), 13, structure.SLOPE),  # per channel or numpy: the user chooses
    ((5,), (1, 3, 4, 4), 13, structure.UNFIT_SLOPE),  # neither reading
    ((2, 1, 1), (1, 3, 4, 4), 13, structure.UNFIT_SLOPE),
    ((5,), (1, 3, 4, 4), 6, structure.UNFIT_SLOPE),  # legacy PRelu: no repair below 7
    ((3, 1, 1), (1, 3, 4, 4), 13, None),
    ((4,), (1, 3, 4, 4), 13, None),
])
def test_the_check_tells_repairable_slopes_from_unfit_ones(slope, x, opset, kind):
    assert _kinds(_prelu(slope, x, opset)) == ([kind] if kind else [])
    assert (kind in structure.REPAIRABLE) == (kind == structure.SLOPE)



def test_inspect_lists_a_slope_fix_reshapes_per_channel(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    src.write_bytes(_prelu((3,)).SerializeToString())
    before = digest(src)
    assert main(["inspect", str(src), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (change,) = [c for c in report["details"]["defects"]["changes"]
                 if c["kind"] == "prelu_slope"]
    assert change["node"] == "'prelu'" and "[3] -> [3, 1, 1]" in change["what"]
    assert digest(src) == before and sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]
    # and fix does what inspect said
    out = tmp_path / "fixed.onnx"
    assert main(["fix", str(src), "-o", str(out), "-q"]) == 0
    assert list(onnx.load(out).graph.initializer[0].dims) == [3, 1, 1]


@pytest.mark.parametrize("command", ["inspect", "fix", "convert", "inline", "fuse"])
def test_a_slope_no_reading_fits_is_one_line_exit_2(tmp_path, capsys, command):
    src = tmp_path / "m.onnx"
    src.write_bytes(_prelu((5,)).SerializeToString())
    argv = [command, str(src)]
    if command != "inspect":
        argv += ["--opset", "17"] if command == "convert" else []
        argv += ["-o", str(tmp_path / "out.onnx")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    for part in (str(src), "graph 'g'", "node 'prelu'",
                 "PRelu-9", "[5]", "no reading fits"):
        assert part in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_inspect_lists_a_domain_fix_cannot_import(tmp_path, capsys):
    m = make_model([helper.make_node("Frobnicate", ["x"], ["y"], domain="com.nowhere",
                                     name="frob")], [vi("x", shape=(2,))], [vi("y", shape=(2,))],
                   opset=13)
    src = tmp_path / "m.onnx"
    src.write_bytes(m.SerializeToString())
    assert main(["inspect", str(src)]) == 0
    out = capsys.readouterr().out
    assert "cannot fix" in out and "'com.nowhere'" in out
    assert main(["fix", str(src), "-o", str(tmp_path / "o.onnx")]) == 2
    assert "com.nowhere" in capsys.readouterr().err


def _split_twice(outs=("a", "a")) -> onnx.ModelProto:
    return make_model([helper.make_node("Split", ["x"], list(outs), name="split", axis=1),
                       helper.make_node("Relu", [outs[0] or "x"], ["y"], name="relu")],
                      [vi("x", shape=(1, 4))], [vi("y", shape=(1, 2))], opset=13)


def test_the_check_flags_a_node_listing_an_output_twice():
    (p,) = structure.problems(_split_twice())
    assert p == (structure.DUPLICATE_VALUE,
                 "graph 'g': node 'split' (Split) lists output 'a' twice")
    f = helper.make_function("local", "F", ["x"], ["y"],
                             [helper.make_node("Split", ["x"], ["y", "y"], axis=0)],
                             [helper.make_opsetid("", 13)])
    m = make_model([helper.make_node("F", ["x"], ["y"], domain="local", name="call")],
                   [vi("x", shape=(4,))], [vi("y", shape=(2,))], opset=13,
                   functions=[f])
    assert [k for k, _ in structure.problems(m)] == [structure.DUPLICATE_VALUE]
    # empty names (absent optional outputs) may repeat
    assert structure.problems(_split_twice(("", "", "b"))) == []


def test_inspect_lists_a_node_listing_an_output_twice_and_fix_refuses_it(tmp_path, capsys):
    src = tmp_path / "m.onnx"
    src.write_bytes(_split_twice().SerializeToString())
    assert main(["inspect", str(src)]) == 0
    out = capsys.readouterr().out
    assert "cannot fix" in out and "'a' appears twice" in out
    assert main(["convert", str(src), "--opset", "17", "-o", str(tmp_path / "o.onnx")]) == 2
    assert "node 'split' (Split) lists output 'a' twice" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_inspect_opset_says_when_fix_makes_a_refused_conversion_possible(tmp_path, capsys):
    """PRelu-9's slope [3] on [1, 3, 4, 4] has no legacy (opset 6) form as it is; once fix
    reads it per channel ([3, 1, 1]) it converts: inspect says so, and fix then convert
    does it."""
    src = tmp_path / "m.onnx"
    src.write_bytes(_prelu((3,), opset=9).SerializeToString())
    assert main(["inspect", str(src), "--opset", "6"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert "convert to opset 6 is impossible: node 'prelu'" in err
    assert err.endswith("; after 'opshift fix' it is possible (0 nodes would change, "
                        "1 relabelled): run fix first"), err
    assert main(["inspect", str(src), "--opset", "6", "--json"]) == 2
    after = json.loads(capsys.readouterr().out)["details"]["conversion"]["after_fix"]
    assert after["target_opset"] == 6 and after["changes"] == []
    fixed, out = tmp_path / "fixed.onnx", tmp_path / "o.onnx"
    assert main(["fix", str(src), "-o", str(fixed), "-q"]) == 0
    assert main(["convert", str(fixed), "--opset", "6", "-o", str(out), "-q", "--verify"]) == 0
    assert onnx.load(out).opset_import[0].version == 6


def test_inspect_opset_says_when_the_conversion_stays_impossible_after_fix(tmp_path, capsys):
    m = _prelu((3,), opset=9)
    """int32 PRelu has no exact form below opset 6, fixed or not."""
    m = _prelu((3,), opset=9)
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(
        np.array([-2, 0, 3], np.int32), "slope"))
    m.graph.input[0].type.tensor_type.elem_type = onnx.TensorProto.INT32
    m.graph.output[0].type.tensor_type.elem_type = onnx.TensorProto.INT32
    src = tmp_path / "m.onnx"
    src.write_bytes(m.SerializeToString())
    assert main(["inspect", str(src), "--opset", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "; after 'opshift fix' too: " in err, err
    assert err.count("node 'prelu'") == 2
    assert main(["inspect", str(src), "--opset", "13"]) == 0  # no defect stands in the way


def test_inspect_api_dry_runs_fix_then_convert_on_copies():
    """opshift.inspect(model, opset) leaves the model it is given as it was, also when it dry
    runs fix and then convert on the repaired model."""
    import opshift

    m = _prelu((3,), opset=9)
    before = m.SerializeToString()
    report = opshift.inspect(m, 6)
    assert m.SerializeToString() == before
    assert "error" in report.conversion and report.conversion["after_fix"]["target_opset"] == 6
    assert [c["kind"] for c in report.defects["changes"]] == ["prelu_slope"]
