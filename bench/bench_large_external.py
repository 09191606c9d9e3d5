"""``opshift convert`` on a model with >= 3 GB of external weights: time and peak RSS next to
``cp`` of the weights file.

Builds, in a temp folder on the /work disk (removed afterwards), a legacy opset-6 model
(Conv -> PRelu with a per-channel slope -> LeakyRelu -> Selu) whose weights live in one
external file ``weights.bin`` of --gb gigabytes (written in 64 MiB chunks, never held in
memory). Then measures, each in a fresh subprocess:

* ``cp weights.bin`` to another folder (the floor for moving the data);
* ``opshift convert model.onnx --opset 17 -o out/model.onnx``: the output's external data is
  copied beside it by the kernel (``shutil.copyfile``: sendfile/copy_file_range; no hard
  links, which onnx refuses to load), the weights never pass through Python;
* optionally (--with-onnx) onnx's own route: ``onnx.load`` (which loads the weights) +
  ``onnx.version_converter`` + ``onnx.save``.

Targets: opshift at most 1.2x the ``cp`` time; peak RSS under 150 MB.

usage: python bench/bench_large_external.py [--gb 3] [--with-onnx]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CHUNK = 64 << 20

def build(folder: Path, gb: float) -> Path:
    """Write model.onnx + weights.bin (``gb`` GiB) into ``folder``; return the model path."""
    n_tensors = 3
    per = int(gb * (1 << 30)) // n_tensors // 4  # float32 elements per big tensor
    rng = np.random.default_rng(0)
    block = rng.standard_normal(CHUNK // 4).astype(np.float32).tobytes()
    inits = []
    offset = 0
    with open(folder / "weights.bin", "wb") as f:
        for i in range(n_tensors):
            length = per * 4
            left = length
            while left:
                k = min(left, len(block))
                f.write(block[:k])
                left -= k
            t = TensorProto(name=f"big{i}", data_type=TensorProto.FLOAT, dims=[per])
            t.data_location = TensorProto.EXTERNAL
            for key, val in (("location", "weights.bin"), ("offset", str(offset)),
                             ("length", str(length))):
                e = t.external_data.add()
                e.key, e.value = key, val
            inits.append(t)
            offset += length
    c = 8
    w = numpy_helper.from_array(rng.standard_normal((c, 3, 3, 3)).astype(np.float32), "W")
    s = numpy_helper.from_array(np.linspace(0.1, 0.8, c, dtype=np.float32), "slope")
    nodes = [helper.make_node("Conv", ["x", "W"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("PRelu", ["conv", "slope"], ["p"], name="prelu"),
             helper.make_node("LeakyRelu", ["p"], ["l"], name="lrelu", alpha=0.1),
             helper.make_node("Selu", ["l"], ["y"], name="selu")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 8, 8])]
    for i in range(n_tensors):
        nodes.append(helper.make_node("Identity", [f"big{i}"], [f"big_out{i}"],
                                      name=f"id{i}"))
        outputs.append(helper.make_tensor_value_info(f"big_out{i}", TensorProto.FLOAT, [per]))
    inits += [w, s]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    graph = helper.make_graph(nodes, "large", inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    m.ir_version = 3
    path = folder / "model.onnx"
    path.write_bytes(m.SerializeToString())  # onnx.save would try to load nothing: fine too
    return path


def run(cmd: list[str]) -> tuple[float, float, int, str]:
    """(seconds, peak RSS MiB, exit code, stderr tail) of one child, by /usr/bin/time when
    present (ru_maxrss of a forked child would include this process's pages)."""
    timer = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").exists()
                                      else None)
    with tempfile.NamedTemporaryFile("r", suffix=".time") as tf:
        full = [timer, "-f", "%e %M", "-o", tf.name, *cmd] if timer else cmd
        t0 = time.perf_counter()
        p = subprocess.run(full, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        wall = time.perf_counter() - t0
        rss = float("nan")
        if timer:
            fields = (tf.read().strip().splitlines() or ["0 0"])[-1].split()
            if len(fields) == 2:
                wall, rss = float(fields[0]), int(fields[1]) / 1024
    return wall, rss, p.returncode, p.stderr.decode(errors="replace").strip()[-300:]


def drop(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gb", type=float, default=3.0, help="size of the weights (GiB)")
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR", "/work"),
                    help="where to create the temp folder (default /work)")
    ap.add_argument("--with-onnx", action="store_true",
                    help="also run onnx.load + version_converter + save (needs RAM)")
    args = ap.parse_args()
    need = int(args.gb * (1 << 30) * 3.2)  # source, cp copy, streaming copy
    free = shutil.disk_usage(args.dir).free
    if free < need:
        print(f"skipped: {free / 2**30:.1f} GiB free in {args.dir}, need "
              f"{need / 2**30:.1f} GiB")
        return 0
    opshift = [sys.executable, "-m", "opshift"]
    with tempfile.TemporaryDirectory(prefix="opshift-large-", dir=args.dir) as tmp:
        tmp = Path(tmp)
        src = tmp / "src"
        src.mkdir()
        t0 = time.perf_counter()
        model = build(src, args.gb)
        size = (src / "weights.bin").stat().st_size
        print(f"built {size / 2**30:.2f} GiB of external weights in "
              f"{time.perf_counter() - t0:.1f} s")
        rows = []
        # interleaved, twice, so neither side gets a colder page cache than the other
        for name, out_dir, cmd in (
            ("cp weights.bin", tmp / "cp", None),
            ("opshift convert", tmp / "conv", opshift),
            ("cp weights.bin", tmp / "cp", None),
            ("opshift convert", tmp / "conv", opshift),
        ):
            out_dir.mkdir()
            if cmd is None:
                res = run(["cp", str(src / "weights.bin"), str(out_dir / "weights.bin")])
            else:
                res = run(cmd + ["convert", str(model), "--opset", "17", "-o",
                                 str(out_dir / "model.onnx"), "-q"])
                if res[2] == 0:
                    m = onnx.load(out_dir / "model.onnx", load_external_data=False)
                    assert (out_dir / "weights.bin").stat().st_size == size
                    assert m.opset_import[0].version == 17
            rows.append((name, *res))
            print(f"  {name:<34} {res[0]:7.2f} s  peak RSS {res[1]:7.1f} MiB  exit {res[2]}"
                  + (f"  {res[3]}" if res[2] else ""), flush=True)
            drop(out_dir)
        if args.with_onnx:
            code = ("import onnx, onnx.version_converter as v, sys; m = onnx.load(sys.argv[1]);"
                    " m = v.convert_version(m, 17); onnx.save(m, sys.argv[2])")
            out_dir = tmp / "onnx"
            out_dir.mkdir()
            res = run([sys.executable, "-c", code, str(model), str(out_dir / "model.onnx")])
            print(f"  {'onnx load+convert+save':<34} {res[0]:7.2f} s  peak RSS {res[1]:7.1f} "
                  f"MiB  exit {res[2]}  {res[3].splitlines()[-1] if res[3] else ''}")
        cp_time = min(r[1] for r in rows if r[0].startswith("cp"))
        ours = [r for r in rows if not r[0].startswith("cp") and r[3] == 0]
        if ours:
            t, rss = min(r[1] for r in ours), max(r[2] for r in ours)
            print(f"  opshift convert: {t / cp_time:.2f}x cp time (best of 2 each; target "
                  f"<= 1.2x), peak RSS {rss:.0f} MiB (target < 150)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
