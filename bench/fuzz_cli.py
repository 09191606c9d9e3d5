"""Hostile-input soak of the command line: the bundled models, mutated at random, through every
command.

    python bench/fuzz_cli.py [--runs 2000] [--seed 0]

Each run mutates one of ``models/*.onnx`` one to three times (dims negative, zero or huge;
inputs that name nothing; attributes of the wrong name, value or type; element types and
opset imports out of range; external data pointing outside the model's folder or into a weights
file beside it at bad offsets and lengths; nodes swapped, deleted or renamed; IR versions)
and runs one command on it (inspect, convert to several opsets, fix, inline, fuse; with and
without ``--verify``), in process. The promises checked, for every run: exit code 0, 1, 2 or 4;
on 2 one error line and no traceback; the input file unchanged; nothing written beside it;
nothing left in the output folder when the command failed. Prints each broken promise with the
kept model's path and exits 1 if there was any.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import random
import shutil
import sys
import tempfile
from pathlib import Path

import onnx
from onnx import TensorProto, helper

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from opshift.cli import main as opshift_main  # noqa: E402
from opshift.graph.scopes import subgraphs  # noqa: E402

COMMANDS = (["inspect"], ["inspect", "--opset", "6"], ["convert", "--opset", "6"],
            ["convert", "--opset", "13"], ["convert", "--opset", "17", "--verify"],
            ["convert", "--opset", "1"], ["convert", "--opset", "9", "--verify"], ["fix"],
            ["fix", "--verify"], ["inline"], ["inline", "--verify"], ["fuse"],
            ["fuse", "--verify"])


def _graphs(m: onnx.ModelProto) -> list[onnx.GraphProto]:
    out = [m.graph]
    for g in out:
        for n in g.node:
            out += [sg for _, sg in subgraphs(n)]
    return out


def _external(t: onnx.TensorProto, rng: random.Random, location: str, extra=()) -> None:
    t.data_location = TensorProto.EXTERNAL
    for field in ("raw_data", "float_data", "int64_data", "int32_data", "double_data"):
        t.ClearField(field)
    del t.external_data[:]
    for key, value in (("location", location), *extra):
        if value:
            e = t.external_data.add()
            e.key, e.value = key, value


def mutate(m: onnx.ModelProto, rng: random.Random) -> bool:
    """One random mutation of ``m``; True when it points a tensor at ``w.bin`` beside it."""
    g = rng.choice(_graphs(m))
    nodes, k = list(g.node), rng.randrange(24)
    if k == 0 and g.input and g.input[0].type.tensor_type.shape.dim:
        rng.choice(g.input[0].type.tensor_type.shape.dim).dim_value = rng.choice(
            [0, -1, -7, 2**40, 1])
    elif k == 1 and nodes and nodes[0].input:
        n = rng.choice(nodes)
        if n.input:
            n.input[rng.randrange(len(n.input))] = rng.choice(["nope", "", "x"])
    elif k == 2 and nodes:
        rng.choice(nodes).attribute.append(helper.make_attribute(
            rng.choice(["alpha", "gamma", "axis", "broadcast", "consumed_inputs", "zzz"]),
            rng.choice([1, 2.5, "s", [1, 2], -3])))
    elif k == 3 and g.initializer:
        rng.choice(g.initializer).data_type = rng.choice([0, 16, 10, 7, 99, 6, 11])
    elif k == 4 and g.initializer:
        t = rng.choice(g.initializer)
        if t.raw_data:
            t.raw_data = t.raw_data[: rng.randrange(len(t.raw_data) + 1)]
        else:
            del t.dims[:]
            t.dims.extend([rng.choice([3, 0, 100])])
    elif k == 5:
        rng.choice(m.opset_import).version = rng.choice([0, 1, 5, 6, 7, 9, 13, 17, 22, 99, -1])
    elif k == 6 and nodes:
        rng.choice(nodes).domain = rng.choice(["", "ai.onnx", "com.x", "ai.onnx.ml"])
    elif k == 7 and g.output:
        rng.choice(g.output).type.tensor_type.elem_type = rng.choice([0, 16, 10, 99, 11, 6])
    elif k == 8 and g.initializer:
        _external(rng.choice(g.initializer), rng, rng.choice(
            ["../../etc/passwd", "/etc/passwd", "w.bin", "a/../../x", ""]),
            [("offset", rng.choice(["", "-5", "10", "abc", str(2**63)]))])
    elif k == 9 and nodes and nodes[0].output:
        n = rng.choice(nodes)
        if n.output:
            n.output[0] = rng.choice([g.input[0].name if g.input else "x", "",
                                      nodes[0].output[0]])
    elif k == 10 and nodes:
        del g.node[rng.randrange(len(nodes))]
    elif k == 11 and len(nodes) > 1:
        i, j = rng.randrange(len(nodes)), rng.randrange(len(nodes))
        a, b = onnx.NodeProto(), onnx.NodeProto()
        a.CopyFrom(g.node[i])
        b.CopyFrom(g.node[j])
        g.node[i].CopyFrom(b)
        g.node[j].CopyFrom(a)
    elif k == 12:
        m.ir_version = rng.choice([0, 1, 3, 4, 7, 8, 10, 11, 12, 99])
    elif k == 13 and nodes:
        n = rng.choice(nodes)
        if n.attribute:
            rng.choice(n.attribute).type = rng.choice([0, 1, 2, 3, 4, 5, 6, 7])
    elif k == 14 and g.initializer:
        g.initializer.add().CopyFrom(rng.choice(g.initializer))
    elif k == 15 and g.input:
        del g.input[rng.randrange(len(g.input))]
    elif k == 16 and g.value_info:
        rng.choice(g.value_info).type.tensor_type.elem_type = rng.choice([0, 10, 16, 7])
    elif k == 17 and g.initializer:
        rng.choice(g.initializer).dims.append(rng.choice([1, 2, 0]))
    elif k == 18 and nodes:
        rng.choice(nodes).op_type = rng.choice(
            ["PRelu", "Selu", "LeakyRelu", "Foo", "If", "Loop", "Relu", ""])
    elif k == 19 and nodes:
        rng.choice(nodes).input.append(rng.choice(["", "x", "nope"]))
    elif k == 20 and m.functions:
        f = rng.choice(m.functions)
        if f.node:
            f.node[0].op_type = rng.choice(["PRelu", "Bar", "Selu"])
    elif k == 21 and g.input:
        t = rng.choice(g.input).type
        if rng.random() < 0.5:
            t.tensor_type.shape.Clear()
        else:
            t.ClearField("tensor_type")
    elif k in (22, 23) and g.initializer:
        _external(rng.choice(g.initializer), rng, "w.bin", [
            ("offset", rng.choice(["0", "4", "7", "100000", "-1"])),
            ("length", rng.choice(["", "0", "4", "16", "48", "1000000", "x"])),
            ("checksum", rng.choice(["", "abc"]))])
        return True
    return False


def run_once(src: Path, rng: random.Random, scratch: Path) -> str | None:
    """Mutate ``src``, run one command on it; the broken promise, or None."""
    m = onnx.load(src)
    weights = any([mutate(m, rng) for _ in range(rng.randint(1, 3))])
    folder = Path(tempfile.mkdtemp(dir=scratch))
    given, out = folder / "in", folder / "out"
    given.mkdir()
    out.mkdir()
    path = given / "m.onnx"
    path.write_bytes(m.SerializeToString())
    if weights:
        (given / "w.bin").write_bytes(os.urandom(rng.choice([0, 8, 64, 4096])))
    before = {p.name: p.read_bytes() for p in given.iterdir()}
    cmd = rng.choice(COMMANDS)
    argv = [cmd[0], str(path), *cmd[1:]] + ([] if cmd[0] == "inspect" else
                                            ["-o", str(out / "o.onnx")])
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            rc = opshift_main(argv)
    except SystemExit as e:
        rc = e.code
    except BaseException as e:  # noqa: BLE001 - the promise is that nothing escapes
        rc = f"{type(e).__name__}: {e}"
    text = err.getvalue().strip()
    problem = None
    if rc not in (0, 1, 2, 4):  # (4: a --verify that left something unchecked)
        problem = f"exit {rc}"
    elif "Traceback" in text:
        problem = "traceback"
    elif rc == 2 and len(text.splitlines()) != 1:
        problem = f"{len(text.splitlines())} error lines"
    elif {p.name: p.read_bytes() for p in given.iterdir()} != before:
        problem = "the input folder changed"
    elif rc != 0 and any(out.iterdir()):
        problem = f"left behind: {sorted(p.name for p in out.iterdir())}"
    if problem:
        kept = scratch / f"broken_{len(list(scratch.glob('broken_*')))}.onnx"
        shutil.copy(path, kept)
        problem = (f"{problem}: opshift {' '.join(cmd)} on {src.name} mutated, kept {kept}"
                   f"\n  {text[:600]}")
    shutil.rmtree(folder)
    return problem


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = random.Random(args.seed)
    models = sorted((REPO / "models").glob("*.onnx"))
    scratch = Path(tempfile.mkdtemp(prefix="opshift-fuzz-"))
    broken = 0
    for i in range(args.runs):
        problem = run_once(rng.choice(models), rng, scratch)
        if problem:
            broken += 1
            print(f"[{i}] {problem}", flush=True)
    print(f"{args.runs} runs (seed {args.seed}): {broken} broke a promise"
          + (f"; models kept in {scratch}" if broken else ""))
    if not broken:
        shutil.rmtree(scratch)
    return 1 if broken else 0


if __name__ == "__main__":
    raise SystemExit(main())
