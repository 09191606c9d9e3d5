"""Shared helpers of the convert tests that call the engine's node conversion alone (the
activations skipped by default, as tests/test_convert.py covers them): the tests set the opset
import themselves, and check the converted model against the original on the evaluator
(bit for bit) and onnxruntime (a second opinion)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_exact, onnxruntime_outputs, run_onnxruntime
from onnx import TensorProto, helper

from opshift.convert.engine import convert_nodes
from opshift.errors import UnsupportedError
from opshift.evaluator import evaluate
from opshift.opsets import ACTIVATIONS, ir_version_for_opset

F = TensorProto.FLOAT
I64 = TensorProto.INT64
X234 = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)


def convert_other_ops(model, source, target, *, skip=ACTIVATIONS):
    """The engine's node conversion alone, the activations skipped by default."""
    return convert_nodes(model, source, target, skip=skip)


def finish(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
    """What the orchestrator does after this pass: the opset import and the IR version."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            imp.version = target
    # IR >= 4 so initializers need not be listed as graph inputs (the orchestrator's job).
    model.ir_version = max(ir_version_for_opset(target), 4)
    return model


def convert(model: onnx.ModelProto, source: int, target: int, **kw) -> list:
    changes = convert_other_ops(model, source, target, **kw)
    finish(model, target)
    onnx.checker.check_model(model, full_check=True)
    return changes


def run_ort(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray]:
    return run_onnxruntime(model, feeds)


def evaluator_outputs(model: onnx.ModelProto, feeds: dict) -> list[np.ndarray] | None:
    """The evaluator's outputs, or None where it does not implement one of the model's ops."""
    try:
        return list(evaluate(model, feeds).values())
    except UnsupportedError as e:
        if "not supported by the opshift evaluator" not in str(e):
            raise
        return None


def one(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, name=f"n_{op.lower()}", **attrs)


def check_same(m_before, m_after, feeds, rtol=1e-6):
    """Same outputs before and after: bit for bit by the evaluator (opshift's exact policy)
    where it implements both; onnxruntime's outputs of the converted model (its own kernels, a
    second opinion) within ``rtol`` of the original's, where it runs them."""
    ev = [evaluator_outputs(m, feeds) for m in (m_before, m_after)]
    rt = [onnxruntime_outputs(m, feeds) for m in (m_before, m_after)]
    checked = False
    if ev[0] is not None and ev[1] is not None:
        assert len(ev[0]) == len(ev[1])
        for i, (a, b) in enumerate(zip(*ev)):
            assert_exact(a, b, f"evaluator, output {i}")
        checked = True
    ref = ev[0] if ev[0] is not None else rt[0]
    if not isinstance(ref, str) and not isinstance(rt[1], str):
        for a, b in zip(ref, rt[1]):
            np.testing.assert_allclose(b, a, rtol=rtol, atol=1e-6)
        checked = True
    if not checked:
        reason = next(r for r in (*rt, ref) if isinstance(r, str))
        pytest.skip(f"the evaluator does not implement the model; {reason}")


def roundtrip(model, source, target, feeds, rtol=1e-6):
    before = onnx.ModelProto()
    before.CopyFrom(model)
    changes = convert(model, source, target)
    check_same(before, model, feeds, rtol)
    return changes


def node(model, op):
    return next(n for n in model.graph.node if n.op_type == op)

