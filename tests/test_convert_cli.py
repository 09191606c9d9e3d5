"""The ``opshift convert`` command: output files, safety, --verify, errors."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import assert_exact, make_model, vi
from onnx import TensorProto as TP
from onnx import helper, numpy_helper
from test_convert import pytorch_style_prelu6, selu_model, xin

from opshift.cli import main
from opshift.evaluator import evaluate


def run(argv, capsys):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def legacy_file(tmp_path):
    p = tmp_path / "legacy6.onnx"
    onnx.save(pytorch_style_prelu6(), p)
    return p


def test_convert_writes_checked_model_and_leaves_input_alone(tmp_path, legacy_file, capsys):
    before = legacy_file.read_bytes()
    out = tmp_path / "m17.onnx"
    rc, text, err = run(["convert", legacy_file, "--opset", 17, "-o", out, "--verify"], capsys)
    assert rc == 0, err
    assert legacy_file.read_bytes() == before
    m = onnx.load(out)
    onnx.checker.check_model(m, full_check=True)
    assert "pass" in text and "FAIL" not in text.upper().replace("FAILURE", "")
    x = xin([1, 3, 4, 5])
    assert_exact(evaluate(pytorch_style_prelu6(), {"x": x})["y"], evaluate(m, {"x": x})["y"])
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_json_output(tmp_path, legacy_file, capsys):
    rc, text, _ = run(["convert", legacy_file, "--opset", 9, "-o", tmp_path / "o.onnx",
                       "--json"], capsys)
    d = json.loads(text)
    details = d["details"]
    assert rc == 0 and details["source_opset"] == 6 and details["target_opset"] == 9
    assert any(c["node"] == "prelu" for c in d["changes"])


def test_failure_leaves_no_output(tmp_path, capsys):
    node = helper.make_node("PRelu", ["x", "s"], ["y"], name="p_bf16")
    s = numpy_helper.from_array(np.ones([1], np.float32), "s")
    m = make_model([node], [vi("x", TP.BFLOAT16, [2])], [vi("y", TP.BFLOAT16, [2])],
                   opset=16, initializers=[s])
    m.graph.initializer[0].data_type = TP.BFLOAT16
    m.graph.initializer[0].ClearField("float_data")
    m.graph.initializer[0].ClearField("raw_data")
    m.graph.initializer[0].int32_data.append(0x3F80)
    src = tmp_path / "bf16.onnx"
    onnx.save(m, src)
    out = tmp_path / "out.onnx"
    rc, _, err = run(["convert", src, "--opset", 12, "-o", out], capsys)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "p_bf16" in lines[0] and "bfloat16" in lines[0]
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bf16.onnx"]


@pytest.mark.parametrize("argv,needle", [
    (["convert", "missing.onnx", "--opset", "9", "-o", "o.onnx"], "no such file"),
    (["convert", "IN", "--opset", "99", "-o", "o.onnx"], "outside 1..28"),
    (["convert", "IN", "--opset", "9", "-o", "IN"], "output is the input"),
    (["convert", "IN", "--opset", "9", "-o", "nodir/o.onnx"], "does not exist"),
])
def test_cli_errors_are_one_line_exit_2(tmp_path, legacy_file, capsys, argv, needle,
                                       monkeypatch):
    monkeypatch.chdir(tmp_path)
    before = legacy_file.read_bytes()
    argv = [str(legacy_file) if a == "IN" else a for a in argv]
    rc, _, err = run(argv, capsys)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
    assert legacy_file.read_bytes() == before
    assert not (tmp_path / "o.onnx").exists()


def test_not_an_onnx_file(tmp_path, capsys):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    rc, _, err = run(["convert", bad, "--opset", "9", "-o", tmp_path / "o.onnx"], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.onnx").exists()


def test_verify_mismatch_exits_1_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """Break one step on purpose (the schema check that writes Selu-1's defaults out):
    --verify must catch it."""
    from opshift.convert import generic

    monkeypatch.setattr(generic.SchemaStep, "check", lambda self, st: None)
    src = tmp_path / "selu1.onnx"
    onnx.save(selu_model(1), src)
    out = tmp_path / "o.onnx"
    rc, text, err = run(["convert", src, "--opset", 6, "-o", out, "--verify"], capsys)
    assert rc == 1, (text, err)
    assert "computes something other than the original" in err and not out.exists()


def test_noop_conversion_writes_equal_model(tmp_path, legacy_file, capsys):
    out = tmp_path / "same.onnx"
    rc, _, _ = run(["convert", legacy_file, "--opset", 6, "-o", out], capsys)
    assert rc == 0 and out.read_bytes() == legacy_file.read_bytes()


def test_help_has_example(capsys):
    with pytest.raises(SystemExit):
        main(["convert", "--help"])
    assert "opshift convert model.onnx --opset 9" in capsys.readouterr().out


def test_external_data_placed_beside_output_never_loaded(tmp_path, capsys, monkeypatch):
    m = onnx.ModelProto()
    m.CopyFrom(pytorch_style_prelu6())  # onnx.save(save_as_external_data) edits its argument
    src_dir, out_dir = tmp_path / "src", tmp_path / "out"
    src_dir.mkdir()
    out_dir.mkdir()
    src = src_dir / "m.onnx"
    onnx.save(m, src, save_as_external_data=True, all_tensors_to_one_file=True,
              location="weights.bin", size_threshold=0)
    data_before = (src_dir / "weights.bin").read_bytes()
    import onnx.external_data_helper as edh

    def refuse(*a, **k):
        raise AssertionError("external data must not be loaded")

    monkeypatch.setattr(edh, "load_external_data_for_model", refuse)
    rc, _, err = run(["convert", src, "--opset", 13, "-o", out_dir / "m13.onnx"], capsys)
    assert rc == 0, err
    monkeypatch.undo()
    # --verify reads only the rewritten node's (small) external constants
    rc, text, err = run(["convert", src, "--opset", 13, "-o", tmp_path / "v13.onnx",
                         "--verify"], capsys)
    assert rc == 0, err
    assert "prelu" in text and "pass" in text
    assert (src_dir / "weights.bin").read_bytes() == data_before
    out = onnx.load(out_dir / "m13.onnx")  # loads weights.bin from out_dir
    assert (out_dir / "weights.bin").exists()
    x = xin([1, 3, 4, 5])
    assert_exact(evaluate(pytorch_style_prelu6(), {"x": x})["y"], evaluate(out, {"x": x})["y"])


def test_bfloat16_selu_down_from_22_passes_its_own_verify(tmp_path):
    """bfloat16 Selu-22 means float32 then one rounding: the float32 Selu-6 between Casts
    that convert writes at opset 13 is exactly that, and --verify says so."""
    x = helper.make_tensor_value_info("x", TP.BFLOAT16, [2, 3, 4, 5])
    y = helper.make_tensor_value_info("y", TP.BFLOAT16, [2, 3, 4, 5])
    m = make_model([helper.make_node("Selu", ["x"], ["y"])], [x], [y], opset=22)
    src, dst = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(m, src)
    assert main(["convert", str(src), "--opset", "13", "-o", str(dst), "--verify", "-q"]) == 0


def test_verify_checks_every_rewrite_it_can_run(tmp_path, capsys):
    """--verify checks each rewritten node of any op on its own; one the schemas say computes
    the same (BatchNormalization-15's and Reshape-14's defaults dropped) needs no check and
    no note."""
    src = Path(__file__).resolve().parent / "data" / "cnn_opset17.onnx"
    rc, text, err = run(["convert", src, "--opset", 9, "-o", tmp_path / "o.onnx", "--verify",
                         "--json"], capsys)
    assert rc == 0, err
    v = json.loads(text)["verify"]
    rows = [r["label"].split()[0] if r["label"] else "whole" for r in v["rows"]]
    assert rows == ["/pool/MaxPool", "/Unsqueeze", "/Unsqueeze_1", "whole"]
    assert v["verdict"] == "ok" and v["unchecked"] == []
    assert not any("/Reshape" in n or "/bn1" in n for n in v["notes"])


def test_verify_fails_a_converted_model_the_evaluator_cannot_run(tmp_path, capsys,
                                                                  monkeypatch):
    """Break the widening of Max's inputs below 8 on purpose: the converted Max-6 gets inputs
    of two shapes, which it does not take. --verify fails it (exit 1), writes nothing."""
    from onnx import TensorProto, helper

    from opshift.convert.steps import broadcast_legacy

    monkeypatch.setattr(broadcast_legacy, "_widen", lambda st, i, out: None)
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Max", ["x", "z"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])]),
        opset_imports=[helper.make_opsetid("", 13)])
    src, out = tmp_path / "max13.onnx", tmp_path / "o.onnx"
    onnx.save(m, src)
    rc, text, err = run(["convert", src, "--opset", 7, "-o", out, "--verify"], capsys)
    assert rc == 1, (text, err)
    assert "Max-6" in err and "runs on the same inputs" in err and not out.exists()


def test_verify_checks_a_constant_turned_initializer(tmp_path, capsys):
    """An int64 Constant goes below 9 as an initializer: its rewrite has no node after it,
    and is checked against that initializer (not left to the whole model)."""
    from onnx import TensorProto, helper, numpy_helper

    m = helper.make_model(helper.make_graph(
        [helper.make_node("Constant", [], ["r"], value=numpy_helper.from_array(
            np.array([1, 2], np.int64))),
         helper.make_node("Tile", ["x", "r"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 6])]),
        opset_imports=[helper.make_opsetid("", 9)])
    src, out = tmp_path / "tile9.onnx", tmp_path / "o.onnx"
    onnx.save(m, src)
    rc, text, err = run(["convert", src, "--opset", 7, "-o", out, "--verify", "--json"],
                        capsys)
    d = json.loads(text)
    assert rc == 0 and d["ok"], err
    assert not [n for n in d["notes"] if "not checked" in n], d["notes"]
    rows = d["verify"]["rows"]
    assert rows[0]["label"].startswith("<Constant #0>") and rows[0]["output"] == "r"
    assert all(r["ok"] for r in rows) and d["verify"]["checks"]["rewrites"] == 1
