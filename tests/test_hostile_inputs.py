"""Seeded byte-level mutants of every bundled model through every command.

Bit flips, truncations, inserted and deleted bytes and overwritten varints turn the bundled
models into the files a disk, a download or a hostile sender produces. Whatever a mutant
holds, every command must end with exit 0, 1 or 2 -- never a traceback or an internal error
(exit 3) -- leave its input file as it was, and leave nothing behind in the output folder
when it fails. Most mutants run in-process through :func:`opshift.cli.main` (fast); a sample
runs as real processes. ``OPSHIFT_FUZZ_SEED`` and ``OPSHIFT_FUZZ_MUTANTS`` (mutants per model)
change the run, e.g. for a longer soak by hand.
"""

from __future__ import annotations

import contextlib
import io
import os
import random
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MODELS, ROOT

from opshift.cli import main

SEED = int(os.environ.get("OPSHIFT_FUZZ_SEED", "13"))
MUTANTS = int(os.environ.get("OPSHIFT_FUZZ_MUTANTS", "8"))  # per bundled model
SUBPROCESS_SAMPLE = 12  # mutants also run as real processes
TIME_LIMIT = 30  # seconds for one command on one small mutant: more is a hang

BUNDLED = sorted(MODELS.glob("*.onnx"))


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def mutate(data: bytes, rng: random.Random) -> tuple[bytes, str]:
    """One mutant of ``data`` and what was done to it."""
    b = bytearray(data)
    kind = rng.choice(("flip", "truncate", "insert", "delete", "varint"))
    if kind == "flip":
        where = [rng.randrange(len(b)) for _ in range(rng.randint(1, 4))]
        for i in where:
            b[i] ^= 1 << rng.randrange(8)
        return bytes(b), f"bits flipped at {where}"
    if kind == "truncate":
        n = rng.randrange(len(b))
        return bytes(b[:n]), f"truncated to {n} bytes"
    i = rng.randrange(len(b))
    if kind == "insert":
        extra = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        b[i:i] = extra
        return bytes(b), f"{extra!r} inserted at {i}"
    if kind == "delete":
        n = rng.randint(1, 8)
        del b[i:i + n]
        return bytes(b), f"{n} bytes deleted at {i}"
    v = rng.choice((0, 1, 0x7F, 0x80, 0xFF, (1 << 31) - 1, 1 << 32, 1 << 62, (1 << 64) - 1,
                    rng.randrange(1 << 16)))
    enc = _varint(v)
    b[i:i + len(enc)] = enc
    return bytes(b), f"varint {v} written at {i}"


def commands(src: Path, out: Path, opset: int) -> list[list[str]]:
    s, o = str(src), str(out)
    return [["convert", s, "--opset", str(opset), "-o", o],
            ["convert", s, "--opset", str(opset), "--verify", "-o", o],
            ["inline", s, "-o", o], ["inline", s, "--verify", "-o", o],
            ["fuse", s, "-o", o], ["fix", s, "-o", o], ["fix", s, "--verify", "-o", o],
            ["inspect", s], ["verify", s, s]]


def mutants():
    """(label, mutant bytes, target opset) for every bundled model, deterministic for SEED."""
    rng = random.Random(SEED)
    out = []
    for path in BUNDLED:
        data = path.read_bytes()
        for k in range(MUTANTS):
            mutant, what = mutate(data, rng)
            out.append((f"{path.name} mutant {k} ({what})", mutant, rng.randint(1, 22)))
    return out


class _Hang(Exception):
    pass


def _alarm(signum, frame):
    raise _Hang(f"no result after {TIME_LIMIT} s")


def _in_process(argv: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT)
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            try:
                code = main(argv)
            except SystemExit as e:  # argparse
                code = e.code
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
    return code, err.getvalue()


def _problem(code, err: str, src: Path, data: bytes, out_dir: Path) -> str | None:
    if "Traceback" in err or "internal error" in err:
        return "traceback or internal error"
    if code not in (0, 1, 2, 4):  # (4: a check that left something unchecked)
        return f"exit {code}"
    if code == 2 and err.count("\n") != 1:
        return "bad input reported in more than one line"
    if src.read_bytes() != data:
        return "input file changed"
    left = sorted(p.name for p in out_dir.iterdir())
    if code not in (0, 4) and left:
        return f"left behind on failure: {left}"
    if any(n.endswith(".tmp") for n in left):
        return f"temporary file left behind: {left}"
    return None


def _fresh(out_dir: Path) -> None:
    shutil.rmtree(out_dir, ignore_errors=True)
    out_dir.mkdir()


def test_mutants_through_every_command(tmp_path):
    src, out_dir = tmp_path / "in" / "model.onnx", tmp_path / "out"
    src.parent.mkdir()
    failures, codes = [], {}
    for label, data, opset in mutants():
        src.write_bytes(data)
        for argv in commands(src, out_dir / "o.onnx", opset):
            _fresh(out_dir)
            code, err = _in_process(argv)
            codes[code] = codes.get(code, 0) + 1
            why = _problem(code, err, src, data, out_dir)
            if why:
                keep = tmp_path / f"failure{len(failures)}.onnx"
                keep.write_bytes(data)
                failures.append(f"{label}: opshift {' '.join(argv[:1] + argv[2:])}: {why} "
                                f"(exit {code}; kept as {keep}): {err.strip()[-400:]}")
    assert not failures, f"seed {SEED}: {len(failures)} failures:\n" + "\n".join(failures)
    assert codes.get(0, 0) and codes.get(2, 0), codes  # some mutants load, some do not


@pytest.mark.parametrize("index", range(SUBPROCESS_SAMPLE))
def test_mutants_as_real_processes(tmp_path, index):
    """A sample as users run it: a process of its own, its real stdout and stderr."""
    all_mutants = mutants()
    label, data, opset = all_mutants[(index * 7919) % len(all_mutants)]
    src, out_dir = tmp_path / "in" / "model.onnx", tmp_path / "out"
    src.parent.mkdir()
    src.write_bytes(data)
    out_dir.mkdir()
    argv = commands(src, out_dir / "o.onnx", opset)[index % 9]
    r = subprocess.run([sys.executable, "-m", "opshift", *argv], capture_output=True,
                       text=True, cwd=tmp_path, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    why = _problem(r.returncode, r.stderr, src, data, out_dir)
    assert why is None, f"seed {SEED}, {label}: opshift {' '.join(argv)}: {why}: {r.stderr}"


# -- what the mutants found, each on its own ----------------------------------------------------

def _run_cli(argv) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _loop_model(trip: int):
    """y = x after a Loop of ``trip`` iterations whose body passes x through (a varint
    overwrite of control_flow.onnx's trip count made one of 10**15)."""
    import numpy as np
    from conftest import make_model
    from onnx import TensorProto, helper, numpy_helper

    t = helper.make_tensor_value_info
    body = helper.make_graph(
        [helper.make_node("Identity", ["c_in"], ["c_out"]),
         helper.make_node("Identity", ["v_in"], ["v_out"])], "body",
        [t("i", TensorProto.INT64, []), t("c_in", TensorProto.BOOL, []),
         t("v_in", TensorProto.FLOAT, [2])],
        [t("c_out", TensorProto.BOOL, []), t("v_out", TensorProto.FLOAT, [2])])
    return make_model([helper.make_node("Loop", ["m", "", "x"], ["y"], body=body, name="loop")],
                      [t("x", TensorProto.FLOAT, [2])], [t("y", TensorProto.FLOAT, [2])],
                      opset=13, initializers=[numpy_helper.from_array(np.array(trip, np.int64),
                                                                      "m")])


def test_loop_with_a_hostile_trip_count_is_not_run(tmp_path):
    """The evaluator does not start 10**15 iterations (it would never end), and fix --verify
    does not hand such a model to onnxruntime either (which grew past 5 GB on it)."""
    src = tmp_path / "m.onnx"
    src.write_bytes(_loop_model(10 ** 15).SerializeToString())
    code, _, err = _run_cli(["verify", src, src])
    assert code == 2 and "trip count 1000000000000000 is over the evaluator's limit" in err
    code, out, err = _run_cli(["fix", src, "--verify", "-o", tmp_path / "o.onnx"])
    assert code == 4 and err == "" and "not checked: whole model" in out, out
    src.write_bytes(_loop_model(3).SerializeToString())  # an ordinary trip count still runs
    assert _run_cli(["verify", src, src])[0] == 0


def test_function_call_missing_an_input_the_body_needs(tmp_path):
    """A bit flip dropped an input of a function call: the PRelu inside gets no slope. The
    evaluator says so (it raised AttributeError on None before: fix --verify exited 3)."""
    from conftest import make_model
    from onnx import TensorProto, helper

    f = helper.make_function("local", "F", ["X", "slope"], ["Y"],
                             [helper.make_node("PRelu", ["X", "slope"], ["Y"], name="prelu")],
                             [helper.make_opsetid("", 16)])
    vi = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    m = make_model([helper.make_node("F", ["x"], ["y"], domain="local", name="call")], [vi],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], opset=16,
                   functions=[f], extra_opsets=[helper.make_opsetid("local", 1)])
    src = tmp_path / "m.onnx"
    src.write_bytes(m.SerializeToString())
    code, _, err = _run_cli(["verify", src, src])
    assert code == 2 and "node 'prelu' (PRelu-16, graph 'function F'): required input 1 is " \
                         "missing" in err, err
    code, out, err = _run_cli(["fix", src, "--verify", "-o", tmp_path / "o.onnx"])
    assert code == 4 and "internal error" not in err and "required input 1 is missing" in out


def _peak_mib(argv, cwd) -> tuple[int, int, str]:
    """Exit code, peak RSS (MiB) and stderr of ``opshift argv`` in a process of its own."""
    code = ("import resource, sys\nfrom opshift.cli import main\ntry:\n"
            "    rc = main(sys.argv[1:])\nfinally:\n"
            "    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "
            "file=sys.stderr)\nsys.exit(rc)\n")
    r = subprocess.run([sys.executable, "-c", code, *map(str, argv)], capture_output=True,
                       text=True, cwd=cwd, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    *err, peak = r.stderr.strip().splitlines()
    return r.returncode, int(peak), "\n".join(err)


def test_a_long_vector_does_not_take_the_machines_memory(tmp_path):
    """A 1 KB model whose Pad reads the first pads of a ConstantOfShape of 2**24 values:
    onnx's shape inference with data propagation spent 1.3 GB on it (5 GB at 2**26, every
    byte at 2**40); opshift runs inference without it, and does not fold a value whose
    nodes make more values than a fold takes."""
    import numpy as np
    from conftest import make_model
    from onnx import TensorProto, helper, numpy_helper

    t = helper.make_tensor_value_info
    consts = [numpy_helper.from_array(np.array(v, np.int64), k)
              for k, v in (("n", [2 ** 24]), ("s", [0]), ("e", [2]))]
    m = make_model([helper.make_node("ConstantOfShape", ["n"], ["z"], name="zeros",
                                     value=numpy_helper.from_array(np.array([0], np.int64))),
                    helper.make_node("Slice", ["z", "s", "e"], ["pads"], name="slice"),
                    helper.make_node("Pad", ["x", "pads"], ["y"], name="pad")],
                   [t("x", TensorProto.FLOAT, [2])], [t("y", TensorProto.FLOAT, [2])],
                   opset=13, initializers=consts)
    src = tmp_path / "m.onnx"
    src.write_bytes(m.SerializeToString())
    for argv in (["convert", src, "--opset", "10", "-o", tmp_path / "c.onnx"],
                 ["fuse", src, "-o", tmp_path / "f.onnx"], ["inspect", src, "--opset", "10"]):
        code, peak, err = _peak_mib(argv, tmp_path)
        assert code in (0, 2) and "Traceback" not in err, err
        assert peak < 600, f"opshift {argv[0]}: {peak} MiB"
