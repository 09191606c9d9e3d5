"""Time one-node PRelu / LeakyRelu / Selu models on float32 [8, 64, 256, 256].

Runs opshift.evaluate, onnx.reference.ReferenceEvaluator and onnxruntime (if installed) in
one process, next to a plain ``x.copy()`` (the memory-bandwidth floor), best of N runs each,
and prints the ratios. Exits 1 when opshift misses a target: at most 3.5x the copy and at
least 2x faster than onnx.reference.

    python bench/bench_evaluator.py [--repeat 5] [--shape 8,64,256,256]
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

MAX_VS_COPY = 3.5
MIN_VS_REFERENCE = 2.0


def _model(op: str, opset: int, shape, slope=None) -> onnx.ModelProto:
    inits = []
    ins = ["x"]
    if slope is not None:
        inits.append(onnx.numpy_helper.from_array(slope, "slope"))
        ins.append("slope")
    g = helper.make_graph([helper.make_node(op, ins, ["y"])], op,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def _best(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--shape", default="8,64,256,256")
    args = p.parse_args(argv)
    shape = [int(d) for d in args.shape.split(",")]

    from onnx.reference import ReferenceEvaluator

    import opshift

    try:
        import onnxruntime as ort
    except ImportError:  # optional
        ort = None

    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape, dtype=np.float32)
    slope = np.full((shape[1], 1, 1), 0.25, dtype=np.float32)
    slope[::2] = 0.1
    cases = [("PRelu", _model("PRelu", 16, shape, slope)),
             ("LeakyRelu", _model("LeakyRelu", 16, shape)),
             ("Selu", _model("Selu", 22, shape))]

    feeds = {"x": x}
    # copy and opshift runs are interleaved so both see the same machine load (shared
    # machines); each figure is the best of its runs.
    ours = {name: float("inf") for name, _ in cases}
    copy_t = float("inf")
    for _ in range(args.repeat):
        copy_t = min(copy_t, _best(lambda: x.copy(), 1))
        for name, model in cases:
            ours[name] = min(ours[name],
                             _best(lambda m=model: opshift.evaluate(m, feeds), 1))
    print(f"float32 {shape}, best of {args.repeat}; x.copy() = {copy_t:.4f} s")
    print(f"{'op':<10} {'opshift s':>10} {'x copy':>7} {'onnx.ref s':>10} {'ref/ours':>9} "
          f"{'ort s':>8}  result")
    failed = False
    for name, model in cases:
        ref = ReferenceEvaluator(model)
        ref_t = _best(lambda r=ref: r.run(None, feeds), max(2, args.repeat // 2))
        ort_t = float("nan")
        if ort is not None:
            sess = ort.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
            ort_t = _best(lambda s=sess: s.run(None, feeds), args.repeat)
        vs_copy, vs_ref = ours[name] / copy_t, ref_t / ours[name]
        ok = vs_copy <= MAX_VS_COPY and vs_ref >= MIN_VS_REFERENCE
        failed |= not ok
        print(f"{name:<10} {ours[name]:>10.4f} {vs_copy:>6.2f}x {ref_t:>10.4f} {vs_ref:>8.2f}x "
              f"{ort_t:>8.4f}  {'ok' if ok else 'MISSED'}")
    print(f"targets: opshift <= {MAX_VS_COPY}x copy and >= {MIN_VS_REFERENCE}x faster than "
          "onnx.reference")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
