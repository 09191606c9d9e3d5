"""Writing outputs: unique temp files created exclusively in the output folder, never written
through a link, published by rename; reruns reuse identical external data, --force replaces
a different file; write failures (file too large, disk full) are one-line errors, exit 2,
with nothing left behind."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import subprocess
import sys

import numpy as np
import onnx
import pytest
from conftest import ROOT
from external_models import listing, weights_model, write
from onnx import helper, numpy_helper

from opshift.cli import main

COMMANDS = {"convert": ["--opset", "14"], "inline": [], "fuse": [], "fix": []}


@pytest.fixture
def tree(tmp_path):
    """src (a model with 1 MiB of external weights in w.bin), out, and outside (a file and
    a folder that no run may write)."""
    src, out, outside = (tmp_path / n for n in ("src", "out", "outside"))
    for d in (src, out, outside):
        d.mkdir()
    weights_model(src, 1)
    (outside / "target.bin").write_bytes(b"precious")
    return src, out, outside


def _run(command, src, out, *extra, name="m.onnx"):
    return main([command, str(src / "m.onnx"), *COMMANDS[command], "-o", str(out / name),
                 "-q", *extra])


def _weights_ok(src, out, name="w.bin"):
    p = out / name
    return not p.is_symlink() and p.read_bytes() == (src / name).read_bytes()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_link_at_the_weights_name_is_never_written_through(tree, capsys, command):
    # The defect: an existing out/w.bin was followed; a link there to a file elsewhere (or
    # at the temp name, below) made the copy land outside the output folder.
    src, out, outside = tree
    (out / "w.bin").symlink_to(outside / "target.bin")
    before = listing(out)
    assert _run(command, src, out) == 2
    err = capsys.readouterr().err
    assert "symbolic link" in err and "--force" in err and len(err.splitlines()) == 1, err
    assert listing(out) == before
    assert _run(command, src, out, "--force") == 0
    assert _weights_ok(src, out) and (out / "m.onnx").is_file()
    assert (outside / "target.bin").read_bytes() == b"precious"
    assert set(listing(out)) == {"m.onnx", "w.bin"}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_link_at_the_old_fixed_temp_name_is_left_alone(tree, command):
    # The weights were copied through `<out>/.w.bin.tmp`, opened with truncation following
    # links: a link planted there made the copy overwrite its target (exit 0) and the
    # published w.bin a link to it.
    src, out, outside = tree
    (out / ".w.bin.tmp").symlink_to(outside / "target.bin")
    (out / ".m.onnx.tmp").symlink_to(outside / "target.bin")
    assert _run(command, src, out) == 0
    assert (outside / "target.bin").read_bytes() == b"precious"
    assert _weights_ok(src, out)
    assert listing(out) == {"m.onnx": ("file", (out / "m.onnx").stat().st_size),
                            "w.bin": ("file", 1 << 20), ".w.bin.tmp": ("link", 0),
                            ".m.onnx.tmp": ("link", 0)}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_link_at_the_model_name_is_replaced_not_followed(tree, command):
    src, out, outside = tree
    (out / "m.onnx").symlink_to(outside / "target.bin")
    assert _run(command, src, out) == 0
    assert (outside / "target.bin").read_bytes() == b"precious"
    assert not (out / "m.onnx").is_symlink()
    assert onnx.load(out / "m.onnx", load_external_data=False).graph.node


def test_a_linked_folder_on_the_way_to_the_weights_is_never_written_through(tmp_path,
                                                                           capsys):
    src, out, outside = (tmp_path / n for n in ("src", "out", "outside"))
    for d in (src, out, outside):
        d.mkdir()
    weights_model(src, 0.25, location="sub/w.bin")
    (out / "sub").symlink_to(outside)
    assert main(["convert", str(src / "m.onnx"), "--opset", "14", "-o",
                 str(out / "m.onnx")]) == 2
    assert "sub: is a symbolic link" in capsys.readouterr().err
    assert list(outside.iterdir()) == [] and set(listing(out)) == {"sub"}
    (out / "sub").unlink()  # a folder that is not there is made, inside the output
    assert main(["convert", str(src / "m.onnx"), "--opset", "14", "-o",
                 str(out / "m.onnx"), "-q"]) == 0
    assert _weights_ok(src, out, "sub/w.bin")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_rerunning_into_the_same_folder_reuses_identical_weights(tree, capsys, command):
    # The defect: the second run failed with "external data file already exists; refusing
    # to overwrite it".
    src, out, _ = tree
    assert _run(command, src, out) == 0
    st = (out / "w.bin").stat()
    assert _run(command, src, out) == 0, capsys.readouterr().err
    again = (out / "w.bin").stat()
    assert (again.st_ino, again.st_mtime_ns) == (st.st_ino, st.st_mtime_ns)  # not rewritten
    assert _weights_ok(src, out) and set(listing(out)) == {"m.onnx", "w.bin"}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_different_weights_file_is_replaced_only_with_force(tree, capsys, command):
    src, out, _ = tree
    other = bytes(1 << 20)  # same size, other bytes: only a comparison of the bytes tells
    (out / "w.bin").write_bytes(other)
    assert _run(command, src, out) == 2
    err = capsys.readouterr().err
    assert f"{out / 'w.bin'}: a different external data file is already there; --force " \
           "replaces it" in err and len(err.splitlines()) == 1, err
    assert (out / "w.bin").read_bytes() == other and set(listing(out)) == {"w.bin"}
    assert _run(command, src, out, "--force") == 0
    assert _weights_ok(src, out) and set(listing(out)) == {"m.onnx", "w.bin"}


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("external", [True, False])
def test_a_missing_output_folder_is_one_error_with_or_without_external_data(
        tmp_path, capsys, command, external):
    # With external data the folder used to be created for the weights (and left there
    # when the model then failed).
    src = tmp_path / "src"
    src.mkdir()
    if external:
        weights_model(src, 0.25)
    else:
        write(src / "m.onnx", helper.make_model(helper.make_graph(
            [helper.make_node("LeakyRelu", ["x"], ["y"])], "g",
            [helper.make_tensor_value_info("x", 1, [2])],
            [helper.make_tensor_value_info("y", 1, [2])]),
            opset_imports=[helper.make_opsetid("", 13)], ir_version=7))
    missing = tmp_path / "nope"
    assert _run(command, src, missing) == 2
    assert capsys.readouterr().err.strip().endswith(
        f"{missing / 'm.onnx'}: output folder {str(missing)!r} does not exist")
    assert not missing.exists()


@pytest.mark.parametrize("command", list(COMMANDS))
def test_an_existing_output_model_is_replaced(tree, command):
    src, out, _ = tree
    (out / "m.onnx").write_bytes(b"old")
    assert _run(command, src, out) == 0
    assert onnx.load(out / "m.onnx", load_external_data=False).graph.node


def test_the_output_may_not_be_an_external_data_file_of_the_input(tree, capsys):
    src, _, _ = tree
    data = (src / "w.bin").read_bytes()
    assert _run("inline", src, src, name="w.bin") == 2
    assert "is an external data file of the input model" in capsys.readouterr().err
    assert (src / "w.bin").read_bytes() == data and set(listing(src)) == {"m.onnx", "w.bin"}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_output_may_not_be_the_input_model(tree, capsys, command):
    # inline, fuse and fix wrote over the input model when -o named it (convert refused).
    src, _, _ = tree
    before = (src / "m.onnx").read_bytes()
    assert _run(command, src, src) == 2
    assert "output is the input file" in capsys.readouterr().err
    assert (src / "m.onnx").read_bytes() == before and set(listing(src)) == {"m.onnx",
                                                                            "w.bin"}


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def _opshift(*args) -> list[str]:
    return [sys.executable, "-m", "opshift", *map(str, args)]


def test_two_concurrent_runs_into_one_folder(tmp_path):
    # Both runs used the same temp name for the weights: one renamed the other's half
    # written copy into place, or failed on its vanished temp.
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    weights_model(src, 16)
    runs = [subprocess.Popen(_opshift("convert", src / "m.onnx", "--opset", "14", "-o",
                                      out / name, "-q"), env=_env(), stderr=subprocess.PIPE)
            for name in ("m.onnx", "m.onnx", "n.onnx")]
    errs = [p.communicate(timeout=120)[1].decode() for p in runs]
    assert [p.returncode for p in runs] == [0, 0, 0], errs
    assert set(listing(out)) == {"m.onnx", "n.onnx", "w.bin"}
    assert _weights_ok(src, out)


def _small_fsize():
    resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _embedded(src):
    """A model without external data whose file is 4 MiB (an initializer held inside)."""
    w = numpy_helper.from_array(np.random.default_rng(0).random(1 << 20, np.float32), "w")
    write(src / "m.onnx", helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "w"], ["s"]), helper.make_node("Selu", ["s"], ["y"])],
        "g", [helper.make_tensor_value_info("x", 1, [1 << 20])],
        [helper.make_tensor_value_info("y", 1, [1 << 20])], [w]),
        opset_imports=[helper.make_opsetid("", 13)], ir_version=7))


#: (command, external data?): the copy of the weights in every command, and the model file
#: itself written by modelio.save (inline and fix without external data)
WRITES = [("convert", True), ("inline", True), ("fuse", True), ("fix", True),
          ("inline", False), ("fix", False)]


@pytest.mark.parametrize(("command", "external"), WRITES)
def test_a_file_size_limit_is_a_one_line_error_with_nothing_left(tmp_path, command,
                                                                 external):
    # EFBIG escaped as a traceback with exit 1.
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    weights_model(src, 4) if external else _embedded(src)
    r = subprocess.run(_opshift(command, src / "m.onnx", *COMMANDS[command], "-o",
                                out / "m.onnx"), env=_env(), capture_output=True, text=True,
                       preexec_fn=_small_fsize, timeout=120)
    failed = out / ("w.bin" if external else "m.onnx")
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == f"opshift {command}: error: {failed}: cannot write: File too " \
                               "large"
    assert listing(out) == {}


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs unshare(1)")
@pytest.mark.parametrize(("command", "external"), [("convert", True), ("inline", False)])
def test_a_full_disk_is_a_one_line_error_with_nothing_left(tmp_path, command, external):
    # ENOSPC, for real: the output folder is a 1 MiB tmpfs in a private mount namespace.
    if subprocess.run(["unshare", "-rm", "true"], capture_output=True).returncode:
        pytest.skip("unshare -rm (a user and mount namespace) is not allowed here")
    src, out = tmp_path / "src", tmp_path / "out"
    src.mkdir()
    out.mkdir()
    weights_model(src, 4) if external else _embedded(src)
    cmd = " ".join(f"'{a}'" for a in _opshift(command, src / "m.onnx", *COMMANDS[command],
                                               "-o", out / "m.onnx"))
    r = subprocess.run(["unshare", "-rm", "sh", "-c",
                        f"mount -t tmpfs -o size=1m tmpfs '{out}' || exit 99; {cmd}; "
                        f"echo rc=$?; ls -A '{out}'"],
                       env=_env(), capture_output=True, text=True, timeout=120)
    if r.returncode == 99:
        pytest.skip(f"cannot mount a tmpfs: {r.stderr.strip()}")
    failed = out / ("w.bin" if external else "m.onnx")
    assert r.stdout.split() == ["rc=2"], (r.stdout, r.stderr)  # exit 2, the folder empty
    assert r.stderr.strip() == f"opshift {command}: error: {failed}: cannot write: No space " \
                               "left on device"


def _refuse(real, after: int, calls: list):
    """``real`` (os.copy_file_range or os.sendfile) that fails with EXDEV from its
    ``after``-th call on (None: never), each call recorded in ``calls``."""
    def call(*a):
        calls.append(a)
        if after is not None and len(calls) > after:
            raise OSError(errno.EXDEV, "refused")
        return real(*a)
    return call


@pytest.mark.parametrize("range_after,send_after,way", [
    (None, None, "copy_file_range"), (0, None, "sendfile"), (2, None, "sendfile"),
    (0, 0, "plain"), (3, 1, "plain")])
def test_the_data_copy_is_exact_whichever_way_the_kernel_allows(
        tmp_path, monkeypatch, range_after, send_after, way):
    """copy_file_range first; a refusal, even part way, starts sendfile again from the first
    byte, and a refusal of that a plain copy; the copy is the source, byte for byte."""
    from opshift.io import output

    data = np.random.default_rng(0).bytes(10 * 4096 + 123)
    (tmp_path / "w.bin").write_bytes(data)
    monkeypatch.setattr(output, "_CHUNK", 4096)
    ranges, sends = [], []
    monkeypatch.setattr(os, "copy_file_range", _refuse(os.copy_file_range, range_after,
                                                       ranges))
    monkeypatch.setattr(os, "sendfile", _refuse(os.sendfile, send_after, sends))
    fd = os.open(tmp_path / "out.bin", os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        output.copy_file(tmp_path / "w.bin", fd, "w.bin")
    finally:
        os.close(fd)
    assert (tmp_path / "out.bin").read_bytes() == data
    assert ranges and bool(sends) == (way != "copy_file_range")
    if way == "copy_file_range":
        assert len(ranges) == 11  # every byte through the kernel, a chunk a call
