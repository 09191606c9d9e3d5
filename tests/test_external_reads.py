"""Every read of tensor data goes through opshift.io.tensors.tensor_array: external data is
read from the model's folder (never the working directory), only from inside it, and bad
external data entries are one-line errors in every command."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from external_models import (
    externalize,
    legacy_prelu,
    max_slope,
    max_slope_in_branch,
    tensor_alpha,
    write,
)
from onnx import helper, numpy_helper

from opshift.cli import main
from opshift.errors import ModelLoadError, OpshiftError
from opshift.evaluator import evaluate
from opshift.io.tensors import read_external, tensor_array

SLOPE = np.array([0.5, -2.0, 3.0], np.float32)
X = np.array([-1, 2, -3, 4] * 3, np.float32).reshape(1, 3, 2, 2)


@pytest.fixture
def folders(tmp_path):
    """src (the model), out (the output), decoy (the working directory)."""
    dirs = [tmp_path / n for n in ("src", "out", "decoy")]
    for d in dirs:
        d.mkdir()
    return dirs


def _decoy(folder, name, value):
    (folder / name).write_bytes(np.asarray(value, np.float32).tobytes())


@pytest.mark.parametrize("decoy", [True, False], ids=["decoy-in-cwd", "nothing-in-cwd"])
def test_inline_legacy_prelu_reads_the_slope_from_the_model_folder(folders, monkeypatch,
                                                                   capsys, decoy):
    # The defect: inline at opset <= 8 read the slope relative to the working directory,
    # so a file of the same name there made it emit a model computing something else (exit
    # 0), and anywhere else it died with a traceback.
    src, out, cwd = folders
    write(src / "m.onnx", legacy_prelu(src, SLOPE))
    if decoy:
        _decoy(cwd, "w.bin", [0.125] * 3)
    monkeypatch.chdir(cwd)
    assert main(["inline", str(src / "m.onnx"), "-o", str(out / "m.onnx"), "-q"]) == 0
    got = evaluate(str(out / "m.onnx"), {"x": X})["y"]
    np.testing.assert_array_equal(got, np.where(X < 0, SLOPE.reshape(3, 1, 1) * X, X))
    assert "PRelu" not in [n.op_type for n in onnx.load(out / "m.onnx").graph.node]


@pytest.mark.parametrize("make", [max_slope, max_slope_in_branch],
                         ids=["initializer", "constant-in-subgraph"])
def test_fuse_checks_the_slope_it_reads_from_the_model_folder(folders, monkeypatch, capsys,
                                                             make):
    # Max(x, 2x) is not a PRelu; with a=0.5 in a decoy a.bin in the working directory fuse
    # used to read the decoy, fuse, and write a model computing PRelu(x, 2) (LeakyRelu(0.5)
    # in the branch).
    src, out, cwd = folders
    write(src / "m.onnx", make(src, 2.0))
    _decoy(cwd, "a.bin", 0.5)
    monkeypatch.chdir(cwd)
    assert main(["fuse", str(src / "m.onnx"), "-o", str(out / "m.onnx"), "-q"]) == 0
    assert main(["inspect", str(out / "m.onnx"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["details"]["activations"] == []
    x = np.array([-2, -0.5, 0.5, 2], np.float32)
    feeds = {"x": x, "c": np.array(True)} if make is max_slope_in_branch else {"x": x}
    np.testing.assert_array_equal(evaluate(str(out / "m.onnx"), feeds)["y"],
                                  np.maximum(x, 2 * x))


def test_fuse_reads_an_external_slope_from_the_model_folder(folders, monkeypatch):
    src, out, cwd = folders  # nothing in the working directory: fuse read nothing before
    write(src / "m.onnx", max_slope(src, 0.25))
    monkeypatch.chdir(cwd)
    assert main(["fuse", str(src / "m.onnx"), "-o", str(out / "m.onnx"), "-q"]) == 0
    (node,) = onnx.load(out / "m.onnx").graph.node  # a one-element slope: LeakyRelu
    assert node.op_type == "LeakyRelu" and node.attribute[0].f == np.float32(0.25)
    x = np.array([-2, -0.5, 0.5, 2], np.float32)
    np.testing.assert_array_equal(evaluate(str(out / "m.onnx"), {"x": x})["y"],
                                  np.maximum(x, np.float32(0.25) * x))


def test_fix_and_inspect_read_an_external_attribute_tensor_from_the_model_folder(
        folders, monkeypatch, capsys):
    src, out, cwd = folders
    write(src / "m.onnx", tensor_alpha(src, 0.25))
    _decoy(cwd, "alpha.bin", [0.75])
    monkeypatch.chdir(cwd)
    assert main(["fix", str(src / "m.onnx"), "-o", str(out / "m.onnx"), "-q"]) == 0
    (node,) = onnx.load(out / "m.onnx").graph.node
    assert [(a.name, a.type, a.f) for a in node.attribute] == [
        ("alpha", onnx.AttributeProto.FLOAT, 0.25)]
    capsys.readouterr()
    assert main(["inspect", str(src / "m.onnx"), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["details"]["activations"]
    assert row["attributes"]["alpha"]["value"] == [0.25]


@pytest.mark.parametrize("case", ["inline", "fuse", "fix", "inspect", "evaluate", "read"])
def test_an_external_tensor_without_a_model_folder_is_refused(tmp_path, monkeypatch, case):
    # An in-memory model has no folder: its external tensors were read relative to the
    # working directory (here: decoys of the right names and sizes).
    for name, value in (("w.bin", [0.125] * 3), ("a.bin", 0.5), ("alpha.bin", [0.75])):
        _decoy(tmp_path, name, value)
    monkeypatch.chdir(tmp_path)
    from opshift.fix import fix
    from opshift.fuse import fuse
    from opshift.inline import inline
    from opshift.inspect import inspect

    run, tensor = {
        "inline": (lambda: inline(legacy_prelu(None, SLOPE)), "slope"),
        "fuse": (lambda: fuse(max_slope(None, 0.5)), "a"),
        "fix": (lambda: fix(tensor_alpha(None, 0.5)), "alpha_t"),
        "inspect": (lambda: inspect(tensor_alpha(None, 0.5)), "alpha_t"),
        "evaluate": (lambda: evaluate(legacy_prelu(None, SLOPE), {"x": X}), "slope"),
        "read": (lambda: tensor_array(legacy_prelu(None, SLOPE).graph.initializer[0]),
                 "slope"),
    }[case]
    with pytest.raises(OpshiftError, match=f"tensor '{tensor}' keeps its data in external "
                                           "file .*the model's folder is not known") as e:
        run()
    assert "\n" not in str(e.value)


def test_the_api_given_a_path_reads_from_the_model_folder(folders, monkeypatch):
    from opshift.inline import inline

    src, _, cwd = folders
    write(src / "m.onnx", legacy_prelu(src, SLOPE))
    _decoy(cwd, "w.bin", [0.125] * 3)
    monkeypatch.chdir(cwd)
    m = inline(str(src / "m.onnx"))  # the slope chose the decomposition, data stays external
    onnx.external_data_helper.load_external_data_for_model(m, str(src))
    got = evaluate(m, {"x": X})["y"]
    np.testing.assert_array_equal(got, np.where(X < 0, SLOPE.reshape(3, 1, 1) * X, X))


def test_read_external_refuses_what_is_not_a_regular_file_inside_the_folder(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    _decoy(outside, "w.bin", SLOPE)
    src = tmp_path / "src"
    src.mkdir()
    (src / "link.bin").symlink_to(outside / "w.bin")
    os.mkfifo(src / "fifo.bin")  # reading it would block forever
    for loc, why in (("link.bin", "outside the model's folder"),
                     ("../outside/w.bin", "outside the model's folder"),
                     (str(outside / "w.bin"), "must be a relative path"),
                     ("fifo.bin", "not a regular file"), ("none.bin", "missing")):
        t = legacy_prelu(None, SLOPE, location=loc).graph.initializer[0]
        with pytest.raises(ModelLoadError, match=why):
            read_external(t, src, "m.onnx")


BAD_ENTRIES = {
    "negative offset": ({"offset": "-4"}, "offset '-4' is not a byte count"),
    "offset not a number": ({"offset": "four"}, "offset 'four' is not a byte count"),
    "negative length": ({"length": "-12"}, "length '-12' is not a byte count"),
    "length not an integer": ({"length": "1e3"}, "length '1e3' is not a byte count"),
    "signed offset": ({"offset": "+0"}, "offset '+0' is not a byte count"),
    "NUL in location": ({"location": "w.bin\x00.txt"}, "holds a NUL byte"),
    "empty location": ({"location": ""}, "has no location"),
    "no location": ({"location": None}, "has no location"),
}
COMMANDS = {"convert": ["--opset", "13", "-o", "OUT"], "inline": ["-o", "OUT"],
            "fuse": ["-o", "OUT"], "fix": ["-o", "OUT"], "inspect": [], "verify": ["IN"]}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(BAD_ENTRIES))
def test_bad_external_data_entries_are_one_line_errors(tmp_path, capsys, command, case):
    # Each was a traceback (int() or pathlib on the raw value) before the entries were
    # checked.
    change, needle = BAD_ENTRIES[case]
    src = tmp_path / "src"
    src.mkdir()
    entries = {"location": "w.bin", "offset": "0", "length": "12", **change}
    entries = {k: v for k, v in entries.items() if v is not None}
    write(src / "m.onnx", legacy_prelu(src, SLOPE, entries=entries))
    before = sorted(p.name for p in tmp_path.rglob("*"))
    argv = [command, str(src / "m.onnx")] + [
        {"OUT": str(tmp_path / "o.onnx"), "IN": str(src / "m.onnx")}.get(a, a)
        for a in COMMANDS[command]]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert needle in err and str(src / "m.onnx") in err and "'slope'" in err, err
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_external_data_of_the_wrong_size_for_the_tensor_is_a_one_line_error(tmp_path):
    t = externalize(numpy_helper.from_array(SLOPE, "s"), tmp_path,
                    entries={"location": "w.bin", "offset": "0", "length": "8"})
    (tmp_path / "w.bin").write_bytes(SLOPE.tobytes())
    with pytest.raises(ModelLoadError, match="8 bytes.*does not hold a tensor of shape"):
        tensor_array(t, tmp_path, "m.onnx")


def test_tensor_array_reads_offsets_and_to_the_end_of_the_file(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\x00" * 16 + SLOPE.tobytes())
    t = helper.make_tensor("s", onnx.TensorProto.FLOAT, [3], [0, 0, 0])
    t.ClearField("float_data")
    externalize(t, None, entries={"location": "w.bin", "offset": "16"})
    np.testing.assert_array_equal(tensor_array(t, tmp_path), SLOPE)
    assert t.data_location == onnx.TensorProto.EXTERNAL  # not modified by the read
