"""Time the bundled evaluator against floors measured in the same run.

1. One-node PRelu / LeakyRelu / Selu on float32 [8, 64, 256, 256], next to ``x.copy()`` (the
   memory floor), ``np.exp(x)`` alone (Selu's exp over every element, as the evaluator
   computes it) and ``np.exp`` of the x <= 0 elements only, gathered beforehand (untimed):
   what exp would cost if selecting those elements and scattering the results back were
   free (they are not: numpy's gather and scatter cost about what they would save).
2. A CNN (8 Conv layers of 32-64 channels, each followed by BatchNormalization and PRelu,
   LeakyRelu or Selu; 1x3x128x128 float32): ``opshift.evaluate`` next to onnxruntime's
   default session (``run`` only; the session is built before timing), and the evaluator's
   result against the same model run in float64 and against onnxruntime's, by
   ``verify.compare`` (an error that 8 layers carry makes outputs near 0 many ulps apart).
   Also the CPU time of one thread each (a child process with OPENBLAS_NUM_THREADS=1): the
   work each does, which load on a shared machine disturbs far less than wall time; and
   the float64 matrix products alone (each Conv's weights times its im2col columns): the
   floor of a Conv accumulated in float64, which no other part of the evaluator can lower.
3. ``opshift verify cnn.onnx cnn.onnx -q`` as a user runs it, process start to exit.

Runs take turns so that load on a shared machine hits all alike; each figure is the best of
its runs. Exits 1 when a target is missed: activations at most 3.5x the copy, the CNN at
most 3x onnxruntime.

    python bench/bench_evaluator.py [--repeat 5] [--shape 8,64,256,256]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

MAX_VS_COPY = 3.5
MAX_VS_ORT = 3.0


def _one_node(op: str, shape, slope=None) -> onnx.ModelProto:
    inits = [] if slope is None else [numpy_helper.from_array(slope, "slope")]
    g = helper.make_graph([helper.make_node(op, ["x"] + ["slope"] * bool(inits), ["y"])], op,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 22)])
    m.ir_version = 10
    return m


def cnn(dtype=np.float32, seed: int = 0) -> onnx.ModelProto:
    """8 Conv (3x3, pads 1; two with stride 2) + BatchNormalization + an activation each."""
    rng = np.random.default_rng(seed)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    nodes, inits = [], []

    def const(name, a):
        inits.append(numpy_helper.from_array(np.asarray(a, dtype), name))
        return name

    x = "input"
    layers = [(3, 32, 1), (32, 32, 1), (32, 64, 2), (64, 64, 1), (64, 64, 2), (64, 64, 1),
              (64, 64, 1), (64, 64, 1)]
    for i, (ci, co, s) in enumerate(layers):
        w = const(f"w{i}", rng.standard_normal((co, ci, 3, 3)) * np.sqrt(2 / (ci * 9)))
        nodes.append(helper.make_node("Conv", [x, w, const(f"b{i}", rng.normal(0, .1, co))],
                                      [f"c{i}"], pads=[1] * 4, strides=[s, s]))
        bn = [const(f"{k}{i}", v) for k, v in (("s", rng.normal(1, .1, co)),
                                               ("bb", rng.normal(0, .1, co)),
                                               ("m", rng.normal(0, .1, co)),
                                               ("v", 1 + .1 * rng.random(co)))]
        nodes.append(helper.make_node("BatchNormalization", [f"c{i}", *bn], [f"n{i}"]))
        act = ("PRelu", "LeakyRelu", "Selu")[i % 3]
        extra = [const(f"sl{i}", rng.normal(.25, .05, (co, 1, 1)))] if act == "PRelu" else []
        nodes.append(helper.make_node(act, [f"n{i}", *extra], [f"a{i}"]))
        x = f"a{i}"
    g = helper.make_graph(nodes, "cnn", [helper.make_tensor_value_info("input", elem,
                                                                       [1, 3, 128, 128])],
                          [helper.make_tensor_value_info(x, elem, [1, 64, 32, 32])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _rounds(jobs: dict, repeat: int, burst: int = 3) -> dict[str, float]:
    """The best time of each job: in each of ``repeat`` rounds every job runs ``burst`` times
    in a row (a job run once after another sleeps, onnxruntime wakes its idle threads first:
    a cold start no steady caller pays), the rounds taking turns so that load on the machine
    hits every job alike."""
    best = dict.fromkeys(jobs, float("inf"))
    for _ in range(repeat):
        for name, fn in jobs.items():
            for _ in range(burst):
                t = time.perf_counter()
                fn()
                best[name] = min(best[name], time.perf_counter() - t)
            # untimed: onnxruntime's idle threads spin a while after a run before they
            # sleep; the next job (on a 2-core machine) must not pay for that
            time.sleep(0.05)
    return best


def activations(shape, repeat: int, evaluate) -> bool:
    x = np.random.default_rng(0).standard_normal(shape, dtype=np.float32)
    slope = np.full((shape[1], 1, 1), 0.25, np.float32)
    slope[::2] = 0.1
    models = {"PRelu": _one_node("PRelu", shape, slope), "LeakyRelu": _one_node("LeakyRelu",
                                                                                 shape),
              "Selu": _one_node("Selu", shape)}
    neg = x[x <= 0]
    jobs = {"copy": lambda: x.copy(), "exp": lambda: np.exp(x), "exp_neg": lambda: np.exp(neg)}
    jobs.update({op: (lambda m=m: evaluate(m, {"x": x})) for op, m in models.items()})
    t = _rounds(jobs, repeat)
    print(f"one node, float32 {shape}, best of {repeat} rounds of 3: x.copy() {t['copy']:.4f} s, "
          f"np.exp(x) {t['exp']:.4f} s ({t['exp'] / t['copy']:.2f}x copy), np.exp of the "
          f"x <= 0 half {t['exp_neg']:.4f} s ({t['exp_neg'] / t['copy']:.2f}x copy)")
    print(f"{'op':<10} {'opshift s':>10} {'x copy':>7} {'np.exp':>7}  result")
    ok = True
    for op in models:
        r = t[op] / t["copy"]
        ok &= r <= MAX_VS_COPY
        print(f"{op:<10} {t[op]:>10.4f} {r:>6.2f}x {t[op] / t['exp']:>6.2f}x  "
              f"{'ok' if r <= MAX_VS_COPY else 'MISSED'}")
    return ok


def whole_cnn(repeat: int, evaluate, compare, path: Path) -> bool:
    import onnxruntime as ort

    m = cnn()
    onnx.save(m, path)
    x = np.random.default_rng(1).standard_normal((1, 3, 128, 128), dtype=np.float32)
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    t = _rounds({"ort": lambda: sess.run(None, {"input": x}),
                 "opshift": lambda: evaluate(m, {"input": x})}, repeat)
    got = next(iter(evaluate(m, {"input": x}).values()))
    exact = next(iter(evaluate(cnn(np.float64), {"input": x.astype(np.float64)}).values()))
    c64 = compare(exact.astype(np.float32), got)
    cort = compare(sess.run(None, {"input": x})[0], got)
    r = t["opshift"] / t["ort"]
    print(f"\nCNN 1x3x128x128 float32, 8 Conv+BatchNormalization+activation, best of {repeat} "
          "rounds of 3"
          f" (OPENBLAS_NUM_THREADS={os.environ.get('OPENBLAS_NUM_THREADS', 'unset')})")
    print(f"  onnxruntime {t['ort'] * 1e3:.1f} ms, opshift.evaluate {t['opshift'] * 1e3:.1f} ms:"
          f" {r:.2f}x  {'ok' if r <= MAX_VS_ORT else 'MISSED'}")
    for what, c in (("the same model in float64", c64), ("onnxruntime", cort)):
        far = c.reason.split(" elements", 1)[0] if c.reason else f"0 of {got.size}"
        print(f"  vs {what}: max abs {c.max_abs:.2g}, max {c.max_ulp} ulp; {far} elements "
              "more than 4 ulp apart")
    return r <= MAX_VS_ORT


def cnn_cpu(repeat: int, evaluate) -> None:
    """CPU time of one thread each (child process: OPENBLAS_NUM_THREADS=1, onnxruntime with
    one intra-op thread): the work each does, whatever else the machine runs."""
    import onnxruntime as ort

    m = cnn()
    x = np.random.default_rng(1).standard_normal((1, 3, 128, 128), dtype=np.float32)
    so = ort.SessionOptions()
    so.intra_op_num_threads = so.inter_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    products = _conv_products(m)
    best = {"ort": float("inf"), "opshift": float("inf"), "products": float("inf")}
    for _ in range(repeat):
        for name, fn in (("ort", lambda: sess.run(None, {"input": x})),
                         ("opshift", lambda: evaluate(m, {"input": x})),
                         ("products", lambda: [w @ c for w, c in products])):
            t = time.process_time()
            fn()
            best[name] = min(best[name], time.process_time() - t)
    print(f"  one thread each, CPU time: onnxruntime {best['ort'] * 1e3:.1f} ms, opshift "
          f"{best['opshift'] * 1e3:.1f} ms: {best['opshift'] / best['ort']:.2f}x; the float64 "
          f"products alone {best['products'] * 1e3:.1f} ms "
          f"({best['products'] / best['ort']:.2f}x onnxruntime)")


def _conv_products(m: onnx.ModelProto) -> list[tuple[np.ndarray, np.ndarray]]:
    """(weights [M, C*9], columns [C*9, output pixels]) in float64 for each Conv of ``m``
    (the cnn(): 3x3 kernels, 128x128 input)."""
    inits = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    side, out = 128, []
    for node in m.graph.node:
        if node.op_type == "Conv":
            w = inits[node.input[1]].astype(np.float64)
            side //= dict((a.name, a.ints) for a in node.attribute)["strides"][0]
            out.append((w.reshape(w.shape[0], -1), np.ones((w[0].size, side * side))))
    return out


def verify_command(path: Path, repeat: int) -> None:
    cmd = [sys.executable, "-m", "opshift", "verify", str(path), str(path), "-q"]
    floor = [sys.executable, "-c", "import numpy, onnx"]
    # as an installed opshift runs: with bytecode caches (a pip install writes them)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    t = _rounds({"verify": lambda: subprocess.run(cmd, check=True, env=env),
                 "floor": lambda: subprocess.run(floor, check=True, env=env)}, min(repeat, 3))
    print(f"  opshift verify cnn.onnx cnn.onnx: {t['verify']:.2f} s, process start to exit "
          f"(python -c 'import numpy, onnx': {t['floor']:.2f} s)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--shape", default="8,64,256,256")
    p.add_argument("--cpu-child", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    from opshift import evaluate
    from opshift.verify import compare

    if args.cpu_child:
        cnn_cpu(args.repeat, evaluate)
        return 0

    ok = activations([int(d) for d in args.shape.split(",")], args.repeat, evaluate)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "cnn.onnx"
        ok &= whole_cnn(args.repeat, evaluate, compare, path)
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        subprocess.run([sys.executable, __file__, "--cpu-child", "--repeat", str(args.repeat)],
                       check=True, env=env)
        verify_command(path, args.repeat)
    print(f"targets: one-node activations <= {MAX_VS_COPY}x copy; CNN <= {MAX_VS_ORT}x "
          "onnxruntime")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
