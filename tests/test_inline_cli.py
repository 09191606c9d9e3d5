"""``opshift inline`` on the command line: output, --verify, --json, errors, atomic writes."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from conftest import MODELS, make_model
from onnx import TensorProto as TP
from onnx import helper

from opshift.cli import main

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _write(tmp_path, opset=13, name="m.onnx"):
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], name="lr", alpha=0.2),
             helper.make_node("Selu", ["a"], ["y"], name="se")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, ["N", 8])],
                   [helper.make_tensor_value_info("y", TP.FLOAT, ["N", 8])], opset=opset)
    p = tmp_path / name
    onnx.save(m, p)
    return p


@pytest.mark.parametrize("opset", [6, 13, 18])
def test_inline_verify_ok(tmp_path, capsys, opset):
    src = _write(tmp_path, opset)
    out = tmp_path / "out.onnx"
    before = src.read_bytes()
    assert main(["inline", str(src), "-o", str(out), "--verify", "-v"]) == 0
    text = capsys.readouterr().out
    assert "verify: ok" in text and "lr (LeakyRelu-" in text and f"wrote {out}" in text
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    assert not {"LeakyRelu", "Selu"} & {n.op_type for n in m.graph.node}
    assert src.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "out.onnx"]


def test_inline_json(tmp_path, capsys):
    src = _write(tmp_path, 18)
    out = tmp_path / "out.onnx"
    assert main(["inline", str(src), "-o", str(out), "--json", "--ops", "Selu"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["output"] == str(out) and [c["op"] for c in d["changes"]] == ["Selu-6"]
    (change,) = d["changes"]
    assert change["why"].startswith("function form") and "sign of a zero" in change["why"]
    assert "Where" in change["what"]
    assert d["ops_before"] == {"LeakyRelu": 1, "Selu": 1} and "Selu" not in d["ops_after"]


def test_verify_mismatch_exits_1_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """A wrong decomposition (gamma 0.1% off) is caught by --verify. (opshift.verify allows
    4 ulp for float32, so --verify cannot see a 1-ulp error; the exactness tests do.)"""
    from opshift.inline import decompose as dec

    real = dec.legacy_selu_template.__wrapped__

    def wrong(alpha, gamma, elem_type, opset):
        return real(alpha, gamma * 1.001, elem_type, opset)

    monkeypatch.setattr(dec, "legacy_selu_template", wrong)
    src = _write(tmp_path, 7)
    out = tmp_path / "out.onnx"
    assert main(["inline", str(src), "-o", str(out), "--verify"]) == 1
    out_text, err = capsys.readouterr()
    assert "FAIL se" in out_text and "computes something other than the original" in err
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx"]


def test_cannot_inline_is_one_line_exit_2(tmp_path, capsys):
    ins = [helper.make_tensor_value_info("x", TP.FLOAT, None),
           helper.make_tensor_value_info("s", TP.FLOAT, None)]
    m = make_model([helper.make_node("PRelu", ["x", "s"], ["y"], name="p")], ins,
                   [helper.make_tensor_value_info("y", TP.FLOAT, None)], opset=6)
    src = tmp_path / "p.onnx"
    onnx.save(m, src)
    out = tmp_path / "out.onnx"
    assert main(["inline", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "p.onnx" in err and "node 'p' (PRelu-6" in err
    assert not out.exists()


def test_bad_options(tmp_path, capsys):
    src = _write(tmp_path)
    assert main(["inline", str(src), "-o", str(tmp_path / "o.onnx"), "--ops", "Elu"]) == 2
    assert "unknown op 'Elu'" in capsys.readouterr().err
    assert main(["inline", str(src), "-o", str(tmp_path / "o.onnx"), "--functions", "F"]) == 2
    assert "no model-local function 'F'" in capsys.readouterr().err
    assert main(["inline", str(tmp_path / "missing.onnx"), "-o", str(tmp_path / "o.onnx")]) == 2


def test_help_shows_an_example(capsys):
    with pytest.raises(SystemExit):
        main(["inline", "--help"])
    assert "opshift inline model.onnx -o" in capsys.readouterr().out


def test_bundled_local_function_model(tmp_path, capsys):
    src = MODELS / "local_function.onnx"
    out = tmp_path / "out.onnx"
    assert main(["inline", str(src), "-o", str(out), "--functions", "all", "--verify"]) == 0
    m = onnx.load(out)
    assert not m.functions
    onnx.checker.check_model(m, full_check=True)
    assert "verify: ok" in capsys.readouterr().out


@pytest.mark.parametrize("verify", [True, False])
def test_external_data_is_carried_to_the_output(tmp_path, verify):
    x = helper.make_tensor_value_info("x", TP.FLOAT, [2, 256])
    slope = onnx.numpy_helper.from_array(
        np.linspace(-1, 1, 256, dtype=np.float32), "slope")
    m = make_model([helper.make_node("PRelu", ["x", "slope"], ["y"], name="p")], [x],
                   [helper.make_tensor_value_info("y", TP.FLOAT, [2, 256])], opset=17,
                   initializers=[slope])
    src_dir = tmp_path / "src"
    src_dir.mkdir()
    onnx.save(m, src_dir / "m.onnx", save_as_external_data=True, location="w.bin",
              size_threshold=0)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert main(["inline", str(src_dir / "m.onnx"), "-o", str(out_dir / "o.onnx"),
                 *(["--verify"] if verify else []), "-q"]) == 0
    assert (out_dir / "w.bin").read_bytes() == (src_dir / "w.bin").read_bytes()
    o = onnx.load(out_dir / "o.onnx")
    onnx.checker.check_model(o, full_check=True)
    assert "Where" in [n.op_type for n in o.graph.node]


def test_untouched_nodes_stay_byte_identical():
    from opshift.inline import inline

    nodes = [helper.make_node("Relu", ["x"], ["a"], name="r", doc_string="keep me"),
             helper.make_node("Selu", ["a"], ["b"], name="s"),
             helper.make_node("Neg", ["b"], ["y"], name="n")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [3])],
                   [helper.make_tensor_value_info("y", TP.FLOAT, [3])], opset=18)
    out = inline(m)
    assert out.graph.node[0].SerializeToString() == m.graph.node[0].SerializeToString()
    assert out.graph.node[-1].SerializeToString() == m.graph.node[2].SerializeToString()
    assert [n.name for n in out.graph.node][1:-1] == [
        "s/Alpha", "s/AlphaCast", "s/Gamma", "s/GammaCast", "s/Zero", "s/ZeroCast", "s/ExpX",
        "s/AlphaMulExpX", "s/AlphaMulExpXSubAlpha", "s/Neg", "s/Pos", "s/XLessThanZero", "s/Y"]
