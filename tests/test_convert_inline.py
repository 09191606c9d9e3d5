"""``convert --inline``: the opset and the activations (and functions) in one run, checked as
one (issue 40, item 9)."""

from __future__ import annotations

import json

import onnx
from clirun import opshift
from conftest import MODELS


def _ops(path) -> list[str]:
    return sorted(n.op_type for n in onnx.load(path).graph.node)


def test_one_command_does_what_convert_then_inline_do(tmp_path):
    src = MODELS / "small_cnn.onnx"
    one, two, final = tmp_path / "one.onnx", tmp_path / "c.onnx", tmp_path / "two.onnx"
    p = opshift("convert", src, "--opset", "9", "--inline", "-o", one, "--verify", "--json")
    d = json.loads(p.stdout)
    assert p.returncode == 0 and d["verify"]["verdict"] == "ok", p.stdout
    assert not {"PRelu", "LeakyRelu", "Selu"} & set(_ops(one))
    assert any(c["what"].startswith("replaced by ") for c in d["changes"])  # inline's
    assert d["verify"]["checks"]["whole_model"]
    assert opshift("convert", src, "--opset", "9", "-o", two).returncode == 0
    assert opshift("inline", two, "-o", final).returncode == 0
    a, b = onnx.load(one), onnx.load(final)
    assert a.graph == b.graph and a.opset_import == b.opset_import


def test_ops_and_functions_choose_what_is_inlined(tmp_path):
    out = tmp_path / "o.onnx"
    p = opshift("convert", MODELS / "small_cnn.onnx", "--opset", "13", "--inline", "--ops",
                "Selu", "-o", out, "--verify")
    assert p.returncode == 0, p.stderr
    assert "inlined 1 node (Selu x1)" in p.stdout
    ops = _ops(out)
    assert "Selu" not in ops and "PRelu" in ops and "LeakyRelu" in ops
    p = opshift("convert", MODELS / "local_function.onnx", "--opset", "17", "--inline",
                "--ops", "none", "--functions", "all", "-o", out, "--verify")
    assert p.returncode == 0, p.stderr
    assert not onnx.load(out).functions and "inlined 1 function" in p.stdout


def test_inline_options_need_inline(tmp_path):
    for extra in (["--ops", "PRelu"], ["--functions", "all"], ["--allow-nonfinite-slope"]):
        p = opshift("convert", MODELS / "small_cnn.onnx", "--opset", "9", "-o",
                    tmp_path / "o.onnx", *extra)
        assert p.returncode == 2 and p.stderr.count("\n") == 1
        assert f"{extra[0]} only applies with --inline" in p.stderr
