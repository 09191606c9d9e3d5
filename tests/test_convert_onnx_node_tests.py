"""onnx's backend node test models (a fixed third) converted to another opset: refused, or
passing the checker with onnxruntime's (or onnx's reference) outputs."""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from conftest import run_onnxruntime
from convert_helpers import convert_other_ops, finish
from onnx import TensorProto, numpy_helper

from opshift.errors import ConversionError

BACKEND_TARGETS = (7, 9, 10, 11, 12, 13, 15, 16, 18, 20, 22, 24)


def _array(v):
    return numpy_helper.to_array(v) if isinstance(v, TensorProto) else v


def _same(a, b) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        tol = 1e-3 if a.dtype == np.float16 else 1e-5  # one float16 ulp near 1 is 1e-3
        return np.allclose(a, b, rtol=tol, atol=tol / 10, equal_nan=True)
    return bool(np.array_equal(a, b))


@functools.cache
def _node_tests() -> dict:
    """onnx's backend node test models of one opset import: a fixed third, to keep this fast."""
    import warnings
    import zlib

    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = collect_testcases(None)
    return {c.name: c for c in cases
            if not zlib.crc32(c.name.encode()) % 3 and len(c.model.opset_import) == 1}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(_node_tests()))
def test_onnx_node_test_converts_exactly_or_is_refused(name):
    """An onnx backend node test model, converted to one other opset (rotating through
    BACKEND_TARGETS), is either refused or passes the checker and gives onnxruntime's outputs
    of the original (or onnx's reference outputs). onnxruntime runs both models: where it
    cannot, or onnx's checker rejects the original, the case is skipped with their reason."""
    import zlib

    c = _node_tests()[name]
    try:
        onnx.checker.check_model(c.model, full_check=True)
    except Exception as e:
        pytest.skip(f"onnx's checker rejects the original: {str(e).strip().splitlines()[0]}")
    h = zlib.crc32(name.encode())
    src = c.model.opset_import[0].version
    targets = [t for t in BACKEND_TARGETS if t != src]
    target = targets[(h // 3) % len(targets)]
    inputs, expected = c.data_sets[0]
    feeds = {v.name: _array(x) for v, x in zip(c.model.graph.input, inputs)}
    ref = run_onnxruntime(c.model, feeds)
    m = onnx.ModelProto()
    m.CopyFrom(c.model)
    try:
        convert_other_ops(m, src, target, skip=())
    except ConversionError as e:
        msg = str(e)
        assert "\n" not in msg and "node '" in msg, msg
        return
    finish(m, target)
    onnx.checker.check_model(m, full_check=True)
    got = run_onnxruntime(m, feeds)
    # onnxruntime's original run, or onnx's reference outputs where onnxruntime's kernel
    # itself differs from them (seen for some Attention-23 cases).
    assert all(_same(a, b) for a, b in zip(ref, got)) or all(
        _same(_array(e), b) for e, b in zip(expected, got)), f"{name} {src} -> {target}"
