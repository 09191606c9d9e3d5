"""``-`` reads a model from stdin and writes one to stdout, in every command that reads or
writes one model; what cannot work that way is refused in one line."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from clirun import opshift
from conftest import MODELS, make_model
from onnx import TensorProto, helper, numpy_helper

SMALL = MODELS / "small_cnn.onnx"


def _parse(data: bytes) -> onnx.ModelProto:
    m = onnx.ModelProto()
    m.ParseFromString(data)
    onnx.checker.check_model(m, full_check=True)
    return m


@pytest.mark.parametrize("argv", [["convert", "--opset", "9"], ["inline"], ["fuse"],
                                  ["fix"]], ids=lambda a: a[0])
def test_stdin_to_stdout(tmp_path, argv):
    data = SMALL.read_bytes()
    p = opshift(argv[0], "-", *argv[1:], "-o", "-", stdin=data, binary=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    m = _parse(p.stdout)
    if argv[0] == "convert":
        assert m.opset_import[0].version == 9
    if argv[0] == "inline":
        assert not {"PRelu", "LeakyRelu", "Selu"} & {n.op_type for n in m.graph.node}
    assert "wrote <stdout>" in p.stderr  # what people read goes to stderr
    assert list(tmp_path.iterdir()) == []


def test_a_pipeline_of_commands(tmp_path):
    a = opshift("convert", "-", "--opset", "13", "-o", "-", stdin=SMALL.read_bytes(),
                binary=True)
    b = opshift("inline", "-", "-o", tmp_path / "i.onnx", "-q", stdin=a.stdout)
    assert (a.returncode, b.returncode) == (0, 0)
    assert b.stdout == b.stderr == ""
    d = opshift("verify", SMALL, tmp_path / "i.onnx", "--json")
    assert d.returncode == 0 and json.loads(d.stdout)["verify"]["ok"]


def test_inspect_and_verify_read_stdin():
    data = SMALL.read_bytes()
    p = opshift("inspect", "-", "--json", stdin=data)
    d = json.loads(p.stdout)
    assert p.returncode == 0 and d["input"] == "-" and d["ops_before"]["Conv"] == 1
    p = opshift("verify", SMALL, "-", stdin=data)
    assert p.returncode == 0 and "verify: ok" in p.stdout
    p = opshift("verify", "-", "-", stdin=data)
    assert p.returncode == 2 and "only one of the two models" in p.stderr


def _external(tmp_path):
    w = numpy_helper.from_array(np.full((3, 1, 1), 0.25, np.float32), "slope")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 2, 2])
    m = make_model([helper.make_node("PRelu", ["x", "slope"], ["y"], name="p")], [x],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 2, 2])],
                   opset=13, initializers=[w])
    path = tmp_path / "ext.onnx"
    onnx.save(m, path, save_as_external_data=True, location="w.bin", size_threshold=0)
    return path


def test_external_data_cannot_go_to_stdout_nor_come_from_stdin(tmp_path):
    src = _external(tmp_path)
    p = opshift("inline", src, "-o", "-", binary=True)
    assert p.returncode == 2 and p.stdout == b""
    assert p.stderr.count("\n") == 1 and "external data" in p.stderr and "stdout" in p.stderr
    p = opshift("convert", "-", "--opset", "17", "-o", tmp_path / "o.onnx",
                stdin=src.read_bytes())
    assert p.returncode == 2 and "external data" in p.stderr and "<stdin>" in p.stderr
    assert sorted(q.name for q in tmp_path.iterdir()) == ["ext.onnx", "w.bin"]


def test_stdin_errors_are_one_line(tmp_path):
    p = opshift("convert", "-", "--opset", "9", "-o", "-", stdin=b"")
    assert p.returncode == 2 and "<stdin>: empty input" in p.stderr
    p = opshift("fix", "-", "-o", "-", stdin=b"\x08garbage")
    assert p.returncode == 2 and "<stdin>: not an ONNX model" in p.stderr
    p = opshift("convert", SMALL, "--opset", "9", "-o", "-", "--json")
    assert p.returncode == 2 and "--json and -o - would both write to stdout" in p.stderr
    assert json.loads(p.stdout)["ok"] is False  # the JSON error object, alone on stdout
    p = opshift("inline", "-", SMALL, "-o", tmp_path)
    assert p.returncode == 2 and "'-' (stdin) can only be the one input" in p.stderr
