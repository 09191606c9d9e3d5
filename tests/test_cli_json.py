"""``--json``: one schema for every command (documented in opshift.cli.output), on
success, on a verification mismatch (exit 1) and on an error (ok false, exit 2, on stdout)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from clirun import json_lines, opshift
from conftest import MODELS, make_model
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift.cli import output as _output

SMALL = MODELS / "small_cnn.onnx"
CHANGE = {"node", "op", "scope", "what", "why"}
#: the verify object, the same in every command
VERIFY = ["ok", "verdict", "complete", "unchecked", "backend", "tolerance", "seed", "rounds",
          "checks", "signed_zeros_differ", "inputs", "kernels", "rows", "notes"]
ROW = {"label", "output", "dtype", "shape", "max_abs", "max_ulp", "ok", "reason"}


def check_schema(d: dict) -> None:
    """Raise AssertionError unless ``d`` follows the documented schema."""
    assert list(d) == list(_output.KEYS)
    assert d["command"] in ("convert", "inline", "fuse", "fix", "inspect", "verify", "ops")
    for k in ("input", "output"):
        assert d[k] is None or isinstance(d[k], str)
    assert isinstance(d["ok"], bool) and d["ok"] == (d["exit_code"] == 0)
    assert d["exit_code"] in (0, 1, 2, 3, 4)
    for c in d["changes"]:
        assert set(c) >= CHANGE and all(isinstance(c[k], str) for k in CHANGE)
    for k in ("ops_before", "ops_after"):
        assert d[k] is None or all(isinstance(n, int) and n > 0 for n in d[k].values())
    v = d["verify"]
    if v is not None:
        assert list(v) == VERIFY and isinstance(v["ok"], bool)
        assert v["verdict"] in ("ok", "FAIL", "incomplete")
        assert v["ok"] == (v["verdict"] == "ok") and v["complete"] == (not v["unchecked"])
        assert all(set(g) == {"what", "why"} for g in v["unchecked"])
        assert v["backend"] in ("opshift", "onnxruntime")
        assert set(v["tolerance"]) == {"ulp", "atol", "rtol"}
        assert set(v["checks"]) == {"rewrites", "whole_model"}
        assert all(set(r) >= ROW for r in v["rows"])
        assert all(isinstance(n, str) for n in v["notes"])
    assert all(isinstance(n, str) for n in d["notes"])
    e = d["error"]
    assert (e is None) == d["ok"] or d["exit_code"] == 1 and e is not None
    if e is not None:
        assert set(e) == {"message", "file", "node", "op"} and e["message"]
    assert isinstance(d["details"], dict)


def test_every_key_is_documented():
    for key in _output.KEYS:
        assert f"``{key}``" in _output.__doc__


@pytest.mark.parametrize("argv", [
    ["convert", "SMALL", "--opset", "9", "-o", "OUT", "--verify"],
    ["inline", "SMALL", "-o", "OUT", "--verify"],
    ["fuse", "SMALL", "-o", "OUT", "--verify"],
    ["fix", "SMALL", "-o", "OUT", "--verify"],
    ["fix", "SMALL", "--dry-run"],
    ["inspect", "SMALL", "--opset", "9"],
    ["verify", "SMALL", "SMALL"],
    ["ops"],
], ids=lambda a: "-".join(a[:1] + a[-1:]))
def test_success(tmp_path, argv):
    out = tmp_path / "o.onnx"
    argv = [str(SMALL) if a == "SMALL" else str(out) if a == "OUT" else a for a in argv]
    p = opshift(*argv, "--json")
    assert p.returncode == 0, p.stderr
    (d,) = json_lines(p.stdout)
    check_schema(d)
    assert d["ok"] and d["command"] == argv[0]
    if "--verify" in argv or argv[0] == "verify":
        v = d["verify"]
        assert v["ok"] and v["backend"] == "opshift" and (v["rows"] or v["notes"])
    if "-o" in argv:
        assert d["output"] == str(out) and out.exists()
    if argv[0] not in ("ops",):
        assert d["input"] == str(SMALL) and d["ops_before"]["Conv"] == 1


def _legacy(path):
    s = numpy_helper.from_array(np.array([0.25, 0.5, 2.0], np.float32), "slope")
    vi = [helper.make_tensor_value_info(n, T.FLOAT, None) for n in "xy"]
    onnx.save(make_model([helper.make_node("PRelu", ["x", "slope"], ["y"], name="pr")],
                         vi[:1], vi[1:], opset=6, initializers=[s]), path)


@pytest.mark.parametrize("command", ["convert", "inline", "fuse", "fix", "inspect"])
def test_errors_are_json_on_stdout_exit_2(tmp_path, command):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00 not a model")
    argv = {"convert": ["--opset", "9", "-o", tmp_path / "o.onnx"], "inspect": []}.get(
        command, ["-o", tmp_path / "o.onnx"])
    p = opshift(command, bad, *argv, "--json")
    assert p.returncode == 2
    (d,) = json_lines(p.stdout)
    check_schema(d)
    assert d["ok"] is False and d["output"] is None and d["input"] == str(bad)
    assert d["error"]["file"] == str(bad) and "not an ONNX model" in d["error"]["message"]
    assert p.stderr.count("\n") == 1  # and the one line for people, on stderr


def test_error_names_node_and_op(tmp_path):
    src = tmp_path / "legacy.onnx"
    _legacy(src)
    p = opshift("inline", src, "-o", tmp_path / "o.onnx", "--json")
    (d,) = json_lines(p.stdout)
    check_schema(d)
    assert p.returncode == 2 and d["error"]["node"] == "pr" and d["error"]["op"] == "PRelu-6"


def test_option_errors_are_json_too(tmp_path):
    p = opshift("convert", SMALL, "--opset", "99", "-o", tmp_path / "o.onnx", "--json")
    (d,) = json_lines(p.stdout)
    check_schema(d)
    assert p.returncode == 2 and "outside 1.." in d["error"]["message"]


def test_mismatch_exit_1(tmp_path):
    vi = [helper.make_tensor_value_info(n, T.FLOAT, [4]) for n in "xy"]
    a, b = tmp_path / "a.onnx", tmp_path / "b.onnx"
    onnx.save(make_model([helper.make_node("Relu", ["x"], ["y"])], vi[:1], vi[1:], opset=13), a)
    onnx.save(make_model([helper.make_node("Neg", ["x"], ["y"])], vi[:1], vi[1:], opset=13), b)
    p = opshift("verify", a, b, "--json")
    (d,) = json_lines(p.stdout)
    check_schema(d)
    assert p.returncode == 1 and d["exit_code"] == 1 and d["verify"]["ok"] is False
    assert d["ops_before"] == {"Relu": 1} and d["ops_after"] == {"Neg": 1}
    assert d["details"]["candidate"] == str(b)


def test_fix_changes_hold_names_not_reprs(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="n"),
             helper.make_node("Neg", ["a"], ["y"], name="n")]
    vi = [helper.make_tensor_value_info(n, T.FLOAT, [4]) for n in "xy"]
    src = tmp_path / "dup.onnx"
    onnx.save(make_model(nodes, vi[:1], vi[1:], opset=13), src)
    d = json.loads(opshift("fix", src, "-o", tmp_path / "o.onnx", "--json").stdout)
    check_schema(d)
    (c,) = d["changes"]
    assert c["kind"] == "node_name" and c["node"] == "n"
