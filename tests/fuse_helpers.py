"""Shared helpers of the fuse tests: special values, small models, "fuses to" and "refused"
checks with the evaluator and onnxruntime."""

from __future__ import annotations

import conftest
import ml_dtypes
import numpy as np
import onnx
from conftest import assert_outputs_exact, make_model, run_onnxruntime, vi
from onnx import TensorProto as TP
from onnx import helper

from opshift import evaluate
from opshift.fuse.driver import fuse_with_result
from opshift.verify import compare

NP = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64, TP.FLOAT16: np.float16,
      TP.BFLOAT16: ml_dtypes.bfloat16, TP.INT32: np.int32}


def specials(dtype, shape) -> np.ndarray:
    """Special values (+-0, +-inf, NaN, subnormals, extremes) then random ones, in ``shape``."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        vals = [0, 1, -1, 7, -7, info.max, info.min, 100, -100]
    else:
        fi = ml_dtypes.finfo(dtype)
        t = float(fi.smallest_subnormal)
        vals = [0.0, -0.0, np.inf, -np.inf, np.nan, t, -t, float(fi.tiny), -float(fi.tiny),
                float(fi.max), -float(fi.max), 1.0, -1.0, 0.5, -0.5, 89.0, -89.0, 1e-3, -1e-3]
    rng = np.random.default_rng(0)
    vals += list(rng.standard_normal(max(n - len(vals), 0)) * 3)
    with np.errstate(over="ignore"):
        return np.array(vals[:n], dtype=np.float64).astype(dtype).reshape(shape)


def ops(m: onnx.ModelProto) -> list[str]:
    return [n.op_type for n in m.graph.node if n.op_type != "Constant"]


def attrs(m: onnx.ModelProto, op: str) -> dict:
    (node,) = [n for n in m.graph.node if n.op_type == op]
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def same_numbers(before, after, feeds, *, signed_zeros=True) -> None:
    """The fused model computes what the unfused one does: opshift's evaluator, bit for bit
    (NaN as NaN); onnxruntime, bit for bit too -- except that its Selu kernel rounds
    differently from Selu's function body (cancellation in alpha*exp(x) - alpha near 0-), so
    there the difference may be a few ulp of max(|y|, 1). ``feeds``: one dict of inputs or a
    list of them. onnxruntime comes last: where it cannot run both models, the test is
    skipped with its reason, after every check of opshift's own."""
    __tracebackhide__ = True  # a skip is reported at the test's line
    feeds = feeds if isinstance(feeds, list) else [feeds]
    for f in feeds:
        assert_outputs_exact(evaluate(before, f), evaluate(after, f), "evaluator",
                             signed_zeros=signed_zeros)
    for f in feeds:
        _onnxruntime_agrees(before, after, f)


def _onnxruntime_agrees(before, after, feeds) -> None:
    __tracebackhide__ = True
    selu = any(n.op_type == "Selu" for n in after.graph.node)
    for a, b in zip(run_onnxruntime(before, feeds), run_onnxruntime(after, feeds)):
        a, b = np.asarray(a), np.asarray(b)
        if not selu:
            c = compare(a, b, ulp=0, signed_zeros=False)
            assert c.ok, f"onnxruntime: {c.reason}"
            continue
        assert np.array_equal(np.isnan(a), np.isnan(b))
        fin = np.isfinite(a)
        assert np.array_equal(a[~fin & ~np.isnan(a)], b[~fin & ~np.isnan(a)])
        scale = np.maximum(np.abs(a[fin]).astype(np.float64), 1.0)
        err = np.abs(a[fin].astype(np.float64) - b[fin].astype(np.float64))
        assert np.all(err <= 4 * np.finfo(a.dtype).eps * scale), float(np.max(err / scale))


XS = (2, 3, 4)  # the shape of x in most models here
const = conftest.const


def init(name, value, dtype=np.float32):
    """conftest's init, float32 unless said."""
    return conftest.init(name, value, dtype)


def model(nodes, *, opset=17, elem=TP.FLOAT, shape=XS, inits=(), extra_inputs=(),
          outputs=("y",)):
    return make_model(nodes, [vi("x", elem, shape), *extra_inputs],
                      [vi(o, elem, shape) for o in outputs], opset=opset, initializers=inits)


def feeds_for(m):
    out = {}
    for v in m.graph.input:
        t = v.type.tensor_type
        shape = tuple(d.dim_value for d in t.shape.dim)
        out[v.name] = specials(NP[t.elem_type], shape)
    return out


def fuses_to(m, op, *, signed_zeros=True, **kw):
    fused, result = fuse_with_result(m, **kw)
    assert ops(fused) == [op], (ops(fused), result.lines())
    onnx.checker.check_model(fused, full_check=True)
    same_numbers(m, fused, feeds_for(m), signed_zeros=signed_zeros)
    return fused, result


def refused(m, reason: str, **kw):
    fused, result = fuse_with_result(m, **kw)
    assert not result.modified, result.lines()
    assert ops(fused) == ops(m)
    assert any(reason in e.detail for e in result.refused), result.lines()
    return result
