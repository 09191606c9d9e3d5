"""opshift's own kernels for ops whose onnx.reference kernel loops in Python, at sizes real
models use: one node each, opshift's evaluator next to onnxruntime's default session (built
before timing; "-" where onnxruntime has no kernel for the version), best of --repeat rounds
taken in turns. With --reference, onnx.reference's kernel too (one run each, given up after
--budget seconds: several take minutes).

    python bench/bench_kernels.py [--repeat 5] [--reference] [--budget 60] [--only Resize]
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _model(op, args, opset=19, out=F, outputs=("y",), **attrs):
    """One ``op`` node on ``args``, (name, array, fed) in the node's input order: fed ones
    are graph inputs, the others initializers."""
    g = helper.make_graph(
        [helper.make_node(op, [n for n, _, _ in args], list(outputs), **attrs)], op,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a, fed in args if fed],
        [helper.make_tensor_value_info(o, out if i == 0 else I64, None)
         for i, o in enumerate(outputs)],
        [numpy_helper.from_array(np.asarray(a), n) for n, a, fed in args if not fed])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 9
    return m, {n: a for n, a, fed in args if fed}


def cases():
    rng = np.random.default_rng(0)

    def f32(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    x = f32(1, 64, 128, 128)
    boxes = np.sort(rng.uniform(0, 200, (1, 1000, 4)).astype(np.float32), axis=-1)
    rois = np.sort(rng.uniform(0, 45, (100, 4)), axis=-1).astype(np.float32)
    q = rng.integers(0, 255, (1, 64, 56, 56)).astype(np.uint8)
    no_roi, x2 = ("roi", np.float32([]), False), ("s", np.float32([1, 1, 2, 2]), False)
    return {
        "Resize nearest x2 [1,64,128,128]": _model(
            "Resize", [("x", x, True), no_roi, x2], mode="nearest",
            coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        "Resize linear x2 [1,64,128,128]": _model("Resize", [("x", x, True), no_roi, x2],
                                                  mode="linear"),
        "Resize cubic x2 [1,16,64,64]": _model(
            "Resize", [("x", f32(1, 16, 64, 64), True), no_roi, x2], mode="cubic"),
        "GridSample bilinear [1,32,64,64]": _model(
            "GridSample", [("x", f32(1, 32, 64, 64), True),
                           ("g", rng.uniform(-1, 1, (1, 64, 64, 2)).astype(np.float32), True)],
            opset=20),
        "RoiAlign 100 RoIs x 256 ch, 7x7": _model(
            "RoiAlign", [("x", f32(1, 256, 50, 50), True), ("rois", rois, True),
                         ("bi", np.zeros(100, np.int64), True)],
            opset=16, output_height=7, output_width=7, sampling_ratio=2),
        "DeformConv 16->16 3x3 [1,16,32,32]": _model(
            "DeformConv", [("x", f32(1, 16, 32, 32), True), ("w", f32(16, 16, 3, 3), False),
                           ("o", f32(1, 18, 32, 32), True)], opset=19, pads=[1, 1, 1, 1]),
        "ConvTranspose 64->32 4x4/2 [1,64,32,32]": _model(
            "ConvTranspose", [("x", f32(1, 64, 32, 32), True), ("w", f32(64, 32, 4, 4), False)],
            opset=17, strides=[2, 2], pads=[1, 1, 1, 1]),
        "LpPool p=2 3x3 [1,64,128,128]": _model("LpPool", [("x", x, True)], opset=18,
                                                kernel_shape=[3, 3], p=2),
        "ScatterElements [64,128,128]": _model(
            "ScatterElements", [("d", x[0], True), ("i", rng.integers(0, 128, x[0].shape), True),
                                ("u", x[0], True)], opset=18, axis=2),
        "GatherND 100k tuples": _model(
            "GatherND", [("d", x[0], True),
                         ("i", np.stack([rng.integers(0, n, 100000) for n in x[0].shape], -1),
                          True)], opset=13),
        "NonMaxSuppression 1000 boxes x 80": _model(
            "NonMaxSuppression", [("b", boxes, True),
                                  ("s", rng.random((1, 80, 1000), np.float32), True),
                                  ("m", np.int64([100]), False),
                                  ("iou", np.float32([0.5]), False)], opset=11, out=I64),
        "TopK k=1000 of 1M": _model(
            "TopK", [("x", f32(1, 1000000), True), ("k", np.int64([1000]), False)], opset=11,
            outputs=("y", "i")),
        "QLinearConv 64->64 3x3 [1,64,56,56]": _model(
            "QLinearConv", [("x", q, True), ("xs", np.float32(0.02), False),
                            ("xz", np.uint8(128), False),
                            ("w", rng.integers(0, 255, (64, 64, 3, 3)).astype(np.uint8), False),
                            ("ws", np.float32(0.01), False), ("wz", np.uint8(128), False),
                            ("ys", np.float32(0.05), False), ("yz", np.uint8(128), False)],
            opset=10, out=TensorProto.UINT8, pads=[1, 1, 1, 1]),
        "Col2Im 8 ch, 3x3 blocks, 64x64": _model(
            "Col2Im", [("c", f32(1, 72, 62 * 62), True), ("i", np.int64([64, 64]), False),
                       ("bs", np.int64([3, 3]), False)], opset=18),
    }


def _best(fn, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        time.sleep(0.05)  # onnxruntime's threads spin a while after a run
    return best


def _reference_child(model, feeds, out):
    from onnx.reference import ReferenceEvaluator

    ev = ReferenceEvaluator(model)
    t = time.perf_counter()
    ev.run(None, feeds)
    out.put(time.perf_counter() - t)


def _reference(model, feeds, budget):
    out = multiprocessing.get_context("fork").Queue()
    p = multiprocessing.get_context("fork").Process(target=_reference_child,
                                                    args=(model, feeds, out))
    p.start()
    p.join(budget)
    if p.is_alive():
        p.kill()
        p.join()
        return f"> {budget:.0f} s"
    return f"{out.get() * 1e3:.0f} ms" if not out.empty() else "fails"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--reference", action="store_true")
    ap.add_argument("--budget", type=float, default=60)
    ap.add_argument("--only", default="", help="cases whose name contains this")
    args = ap.parse_args(argv)
    import onnxruntime as ort

    from opshift.evaluator import evaluate
    from opshift.evaluator.kernels import kernels

    print(f"{'case':<40} {'kernel':<8} {'opshift':>9} {'onnxruntime':>12} {'ratio':>6}"
          + (f" {'onnx.reference':>15}" if args.reference else ""))
    for name, (m, feeds) in cases().items():
        if args.only not in name:
            continue
        source = next(iter(kernels(m).sources.values()))
        evaluate(m, feeds)
        ours = _best(lambda m=m, feeds=feeds: evaluate(m, feeds), args.repeat)
        try:
            sess = ort.InferenceSession(m.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
            sess.run(None, feeds)
            theirs = _best(lambda s=sess, f=feeds: s.run(None, f), args.repeat)
            cells = f"{theirs * 1e3:>9.2f} ms {ours / theirs:>5.1f}x"
        except Exception:  # no onnxruntime kernel for the version
            cells = f"{'-':>12} {'':>6}"
        ref = f" {_reference(m, feeds, args.budget):>15}" if args.reference else ""
        print(f"{name:<40} {source:<8} {ours * 1e3:>6.2f} ms {cells}{ref}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
