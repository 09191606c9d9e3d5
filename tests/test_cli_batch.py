"""Several models per call: files, folders, quoted globs, ``-o DIR``, ``-j N``; one line (or
one JSON object) per model; the worst exit code; a bad model does not stop the others."""

from __future__ import annotations

import shutil

import onnx
import pytest
from clirun import json_lines, opshift
from conftest import MODELS

NAMES = ("prelu7", "selu6", "small_cnn")


@pytest.fixture
def folder(tmp_path):
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    for name in NAMES:
        shutil.copy(MODELS / f"{name}.onnx", src)
    shutil.copy(MODELS / "leakyrelu1.onnx", src / "sub")
    return src


def test_folder_to_folder_in_worker_processes(folder, tmp_path):
    (folder / "bad.onnx").write_bytes(b"\x00 not a model")
    out = tmp_path / "out"
    p = opshift("convert", folder, "--opset", "13", "-o", out, "-j", "2", "--verify")
    assert p.returncode == 2  # the worst: one bad model
    lines = p.stdout.splitlines()
    assert lines == sorted(lines) and len(lines) == 4  # one per good model, in order
    assert all(" -> " in line and "verify: ok" in line for line in lines)
    assert p.stderr.strip().splitlines() == [
        f"opshift convert: error: {folder / 'bad.onnx'}: not an ONNX model (protobuf parse "
        "failed; truncated or not ONNX)"]
    written = sorted(str(q.relative_to(out)) for q in out.rglob("*.onnx"))
    assert written == ["prelu7.onnx", "selu6.onnx", "small_cnn.onnx", "sub/leakyrelu1.onnx"]
    for q in out.rglob("*.onnx"):
        assert onnx.load(q).opset_import[0].version == 13


def test_json_lines_one_object_per_model(folder, tmp_path):
    (folder / "bad.onnx").write_bytes(b"")
    p = opshift("inspect", folder / "*.onnx", "--json")  # a quoted glob: opshift expands it
    objs = json_lines(p.stdout)
    assert p.returncode == 2
    assert [o["input"] for o in objs] == [str(folder / f"{n}.onnx")
                                         for n in ("bad", *NAMES)]
    assert [o["ok"] for o in objs] == [False, True, True, True]
    assert objs[0]["error"]["file"] == str(folder / "bad.onnx") and "empty" in \
        objs[0]["error"]["message"]


def test_several_files_with_an_output_folder(folder, tmp_path):
    out = tmp_path / "out"
    files = [folder / f"{n}.onnx" for n in NAMES]
    # prelu7's slope is an IR 3 initializer-input: a run-time slope at opset 7
    p = opshift("inline", *files, "-o", out, "-q", "--allow-nonfinite-slope")
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")
    assert sorted(q.name for q in out.iterdir()) == sorted(f"{n}.onnx" for n in NAMES)
    p = opshift("fix", *files, "--dry-run")
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 3
    assert all(" -> " not in x for x in p.stdout.splitlines())  # nothing was written


def test_exit_code_is_the_worst(folder, tmp_path):
    # inspect --opset 11 cannot convert the bfloat16 Selu-22 model (exit 2); others are fine
    shutil.copy(MODELS / "selu22_bf16.onnx", folder)
    p = opshift("inspect", folder, "--opset", "11")
    assert p.returncode == 2 and "selu22_bf16.onnx" in p.stderr
    assert len(p.stdout.splitlines()) == 5  # every model gets its line
    assert (p.stdout + p.stderr).count("impossible") == 1


def test_a_mismatch_is_not_hidden_by_a_refusal():
    """Of several models' exit codes the most severe: an internal error (3), then a rewrite
    that computes something else (1), then a refusal (2)."""
    from opshift.cli.batch import worst

    assert worst([0, 2, 1, 0]) == 1 and worst([2, 0]) == 2 and worst([1, 3, 2]) == 3
    assert worst([0, 0]) == 0 and worst([]) == 0


def test_batch_output_errors(folder, tmp_path):
    files = [folder / f"{n}.onnx" for n in NAMES]
    p = opshift("convert", *files, "--opset", "13", "-o", "-")
    assert p.returncode == 2 and "several models cannot all go to stdout" in p.stderr
    (tmp_path / "f").write_text("x")
    p = opshift("convert", *files, "--opset", "13", "-o", tmp_path / "f")
    assert p.returncode == 2 and "need an output folder" in p.stderr
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(files[0], other)
    p = opshift("convert", files[0], other / files[0].name, "--opset", "13", "-o", tmp_path)
    assert p.returncode == 2 and "would both be written to" in p.stderr
    p = opshift("convert", folder, "--opset", "13", "-o", folder)
    assert p.returncode == 2 and "output is the input file" in p.stderr
    p = opshift("inspect", tmp_path / "nothing*.onnx")
    assert p.returncode == 2 and "no file matches" in p.stderr


def test_one_model_into_an_existing_folder(folder, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    p = opshift("convert", folder / "prelu7.onnx", "--opset", "13", "-o", out)
    assert p.returncode == 0 and (out / "prelu7.onnx").exists()
    assert p.stdout.splitlines()[-1].endswith(f"wrote {out / 'prelu7.onnx'}")
    p = opshift("convert", "-", "--opset", "13", "-o", out,
                stdin=(folder / "prelu7.onnx").read_bytes())
    assert p.returncode == 2 and "needs a file name" in p.stderr


def test_a_batch_frees_each_models_cycles_before_the_next(folder, tmp_path, monkeypatch):
    # the cyclic collector is paused while a command runs (its objects live until it ends);
    # in a batch, what one model left in reference cycles must not pile up for the next
    import gc
    import weakref

    from opshift.cli import inspect as inspect_command
    from opshift.cli import main

    class Node:
        pass

    left: list[weakref.ref] = []
    seen: list[tuple[bool, list[bool]]] = []
    process = inspect_command.process

    def leaky(args, job):
        seen.append((gc.isenabled(), [r() is None for r in left]))
        a, b = Node(), Node()
        a.other, b.other = b, a  # freed only by the cyclic collector
        left.append(weakref.ref(a))
        return process(args, job)

    monkeypatch.setattr(inspect_command, "process", leaky)
    assert gc.isenabled()
    assert main(["inspect", str(folder), "-q"]) == 0
    assert gc.isenabled()
    assert seen == [(False, []), (False, [True]), (False, [True, True]),
                    (False, [True, True, True])]


def _dies_on_b(args, job):
    """A process function whose worker is killed (as by the out-of-memory killer) on the
    job named 'b'."""
    import os
    import signal

    from opshift.cli.output import Outcome

    if job.input == "b":
        os.kill(os.getpid(), signal.SIGKILL)
    return Outcome(args.command, job.input)


def test_a_worker_killed_fails_its_model_and_the_batch_goes_on():
    from argparse import Namespace

    from opshift.cli.batch import Job, outcomes

    args = Namespace(jobs=2, command="inspect", verbose=False)
    todo = [Job(name, None, single=False) for name in ("a", "b", "c", "d", "e")]
    got = list(outcomes(args, _dies_on_b, todo))
    assert [o.input for o in got] == ["a", "b", "c", "d", "e"]
    assert [o.exit_code for o in got] == [0, 2, 0, 0, 0]
    assert "the worker process died" in str(got[1].error)


def test_a_trailing_slash_makes_the_output_a_folder(folder, tmp_path):
    out = tmp_path / "made" / "out"
    p = opshift("convert", folder / "prelu7.onnx", "--opset", "13", "-o", f"{out}/")
    assert p.returncode == 0, p.stderr
    assert out.is_dir() and [q.name for q in out.iterdir()] == ["prelu7.onnx"]
    assert onnx.load(out / "prelu7.onnx").opset_import[0].version == 13
    (tmp_path / "file").write_text("x")
    p = opshift("convert", folder / "prelu7.onnx", "--opset", "13", "-o", f"{tmp_path}/file/")
    assert p.returncode == 2 and "a trailing slash names a folder, and this is a file" in \
        p.stderr
    assert (tmp_path / "file").read_text() == "x"


def test_more_jobs_than_models_share_the_memory_of_those_started(tmp_path):
    # the memory limit was the machine's divided by -j before -j was capped to the models:
    # 300 workers' shares were too small to import a module (exit 3)
    src = tmp_path / "in"
    src.mkdir()
    for name in (*NAMES, "leakyrelu1", "selu1_defaults", "prelu6_conv_per_channel"):
        shutil.copy(MODELS / f"{name}.onnx", src)
    p = opshift("convert", src, "--opset", "9", "-o", tmp_path / "out", "-j", "300")
    assert (p.returncode, p.stderr) == (0, "")
    assert len(p.stdout.splitlines()) == 6 and len(list((tmp_path / "out").iterdir())) == 6
    p = opshift("convert", src / "prelu7.onnx", "--opset", "9", "-o", tmp_path / "one.onnx",
                "-j", "1024")
    assert p.returncode == 0 and (tmp_path / "one.onnx").exists()


@pytest.mark.parametrize("jobs", ["1025", "100000"])
def test_absurd_jobs_are_a_usage_error(folder, tmp_path, jobs):
    p = opshift("convert", folder / "prelu7.onnx", "--opset", "9", "-o", tmp_path / "o.onnx",
                "-j", jobs)
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.splitlines() == [
        f"opshift convert: error: argument -j/--jobs: at most 1024, got {jobs} (more workers "
        "than cores, or models, are not started anyway)"]
    assert not (tmp_path / "o.onnx").exists()


def test_workers_are_capped_to_the_models_and_the_cores():
    import os

    from opshift.cli.batch import workers_for

    cores = len(os.sched_getaffinity(0))
    assert workers_for(300, 6) == min(6, cores)
    assert workers_for(1, 6) == 1 and workers_for(8, 1) == 1
    assert workers_for(1024, 10_000) == cores


def test_what_is_not_a_regular_file_gets_its_own_error_line(folder, tmp_path):
    import os

    os.mkfifo(folder / "fifo.onnx")
    (folder / "dangling.onnx").symlink_to(tmp_path / "nowhere.onnx")
    (folder / "dir.onnx").mkdir()
    p = opshift("inspect", folder, "-j", "2")
    assert p.returncode == 2
    assert len(p.stdout.splitlines()) == 4  # the models are all processed
    assert sorted(p.stderr.splitlines()) == [
        f"opshift inspect: error: {folder / 'dangling.onnx'}: dangling symbolic link (to "
        f"{tmp_path / 'nowhere.onnx'}, which does not exist)",
        f"opshift inspect: error: {folder / 'dir.onnx'}: is a directory, not an ONNX file",
        f"opshift inspect: error: {folder / 'fifo.onnx'}: is a FIFO (named pipe), not a "
        "regular file (to read a model from a pipe, give '-' and pipe it to stdin)"]


def test_a_fifo_given_alone_is_refused_without_being_opened(tmp_path):
    import os

    fifo = tmp_path / "f.onnx"
    os.mkfifo(fifo)
    for argv in (["inspect", fifo], ["convert", fifo, "--opset", "9", "-o", tmp_path / "o"]):
        p = opshift(*argv)  # opening it for reading would wait for a writer forever
        assert p.returncode == 2 and p.stdout == ""
        assert p.stderr.splitlines() == [
            f"opshift {argv[0]}: error: {fifo}: is a FIFO (named pipe), not a regular file "
            "(to read a model from a pipe, give '-' and pipe it to stdin)"]
