"""The command line's options, as a user runs it (``python -m opshift ...``): --version,
common options before or after the command, no abbreviations, -q and -v."""

from __future__ import annotations

import json

import onnx
import pytest
from clirun import opshift
from conftest import MODELS

import opshift as pkg

SMALL = MODELS / "small_cnn.onnx"


def test_version_names_opshift_onnx_and_the_opsets():
    p = opshift("--version")
    assert p.returncode == 0
    assert p.stdout.startswith(f"opshift {pkg.__version__} (onnx {onnx.__version__}, "
                               f"opsets 1..{onnx.defs.onnx_opset_version()}, Python ")


def test_common_options_before_or_after_the_command(tmp_path):
    out = tmp_path / "o.onnx"
    after = opshift("convert", SMALL, "--opset", "9", "-o", out, "-v", "--json")
    before = opshift("-v", "--json", "convert", SMALL, "--opset", "9", "-o", out)
    assert after.returncode == before.returncode == 0
    assert after.stdout == before.stdout and before.stdout.startswith('{"command": "convert"')
    p = opshift("-q", "--input-shape", "input:2,3,8,8", "-j", "1", "inspect", SMALL)
    assert p.returncode == 0 and p.stdout == "" and p.stderr == ""
    p = opshift("-j2", "--input-shape=input:2,3,8,8", "--json", "inspect", SMALL)
    assert p.returncode == 0 and '"command": "inspect"' in p.stdout


def test_help_lists_the_common_options_and_which_command_when():
    p = opshift("--help")
    assert p.returncode == 0
    for text in ("--version", "--json", "-q, --quiet", "which command when", "exit codes"):
        assert text in p.stdout


@pytest.mark.parametrize("argv,unknown", [
    (["convert", "IN", "--ops", "9", "-o", "OUT"], "--ops"),   # not --opset
    (["convert", "IN", "--opset", "9", "-o", "OUT", "--verif"], "--verif"),  # not --verify
    (["inline", "IN", "-o", "OUT", "--func", "all"], "--func"),  # not --functions
    (["--vers"], "--vers"),  # not --version
    (["inspect", "IN", "--al"], "--al"),  # not --all
])
def test_abbreviations_are_rejected(tmp_path, argv, unknown):
    out = tmp_path / "o.onnx"
    argv = [str(SMALL) if a == "IN" else str(out) if a == "OUT" else a for a in argv]
    p = opshift(*argv)
    assert p.returncode == 2 and not out.exists()
    assert unknown in p.stderr and ("unrecognized" in p.stderr or "required" in p.stderr)


def test_quiet_and_verbose_together_is_an_error(tmp_path):
    for argv in (["-q", "-v", "inspect", SMALL], ["inspect", SMALL, "-qv"],
                 ["convert", SMALL, "--opset", "9", "-o", tmp_path / "o.onnx", "-q", "-v"]):
        p = opshift(*argv)
        assert p.returncode == 2 and "-q and -v cannot be used together" in p.stderr
    assert not (tmp_path / "o.onnx").exists()


@pytest.mark.parametrize("argv", [
    ["convert", "IN", "--opset", "9", "-o", "OUT", "--verify"],
    ["inline", "IN", "-o", "OUT", "--verify"],
    ["fuse", "IN", "-o", "OUT", "--verify"],
    ["fix", "IN", "-o", "OUT", "--verify"],
    ["inspect", "IN", "--opset", "9"],
    ["verify", "IN", "IN"],
    ["ops"],
], ids=lambda a: a[0])
def test_quiet_prints_nothing_on_success(tmp_path, argv):
    out = tmp_path / "o.onnx"
    argv = [str(SMALL) if a == "IN" else str(out) if a == "OUT" else a for a in argv]
    p = opshift(*argv, "-q")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")


def test_tolerance_options_need_a_check(tmp_path):
    p = opshift("convert", SMALL, "--opset", "9", "-o", tmp_path / "o.onnx", "--ulp", "2")
    assert p.returncode == 2 and "--ulp only applies with --verify" in p.stderr
    p = opshift("verify", SMALL, SMALL, "--atol", "-1")
    assert p.returncode == 2 and "--atol" in p.stderr


def _lookup(path):
    """An embedding lookup at opset 13: token ids (int64) index a table of 5 rows, so
    generated ids (the full int64 range) are out of range and only real ones run it."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.arange(15, dtype=np.float32).reshape(5, 3), "table")
    g = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["e"], name="lookup"),
         helper.make_node("LeakyRelu", ["e"], ["y"], name="act", alpha=0.1)], "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 3])], [table])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.save(m, path)


@pytest.mark.parametrize("argv", [["convert", "--opset", "9"], ["inline"], ["fix"],
                                  ["fuse"]], ids=lambda a: a[0])
def test_verify_runs_the_whole_model_on_given_inputs(tmp_path, argv):
    """--inputs FILE.npz feeds the whole-model check of every command's --verify; without it
    the generated ids stay within the rows of the table they index, so the model runs whole
    on generated inputs too."""
    import numpy as np

    src, out, npz = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "ids.npz"
    _lookup(src)
    if argv[0] == "fuse":  # the LeakyRelu written out, for fuse to find
        assert opshift("inline", src, "-o", tmp_path / "i.onnx").returncode == 0
        src = tmp_path / "i.onnx"
    np.savez(npz, **{"input:ids": np.array([4, 0, 2, 2], np.int64)})
    p = opshift(argv[0], src, *argv[1:], "-o", out, "--verify", "--json")
    assert p.returncode == 0, p.stdout
    v = json.loads(p.stdout)["verify"]
    assert v["verdict"] == "ok" and v["checks"]["whole_model"], v
    assert v["inputs"]["ids"]["source"] == "generated, realistic, in [0, 5)"
    p = opshift(argv[0], src, *argv[1:], "-o", out, "--verify", "--inputs", npz)
    assert p.returncode == 0, p.stderr
    assert "the whole model (1 output) match" in p.stdout and "not verified" not in p.stdout


def test_given_inputs_are_checked_and_need_verify(tmp_path):
    import numpy as np

    src, out, npz = tmp_path / "m.onnx", tmp_path / "o.onnx", tmp_path / "bad.npz"
    _lookup(src)
    np.savez(npz, nope=np.zeros(3))
    p = opshift("convert", src, "--opset", "9", "-o", out, "--verify", "--inputs", npz)
    assert p.returncode == 2 and p.stderr.strip().endswith(
        f"{npz}: 'nope' is not an input of {src} (inputs: ids)")
    np.savez(npz, ids=np.zeros((2, 2), np.int64))
    p = opshift("convert", src, "--opset", "9", "-o", out, "--verify", "--inputs", npz)
    assert p.returncode == 2 and str(npz) in p.stderr and not out.exists()
    p = opshift("convert", src, "--opset", "9", "-o", out, "--inputs", npz)
    assert p.returncode == 2 and "--inputs only applies with --verify" in p.stderr
