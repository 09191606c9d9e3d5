"""opshift inside its host libraries: onnx_ir pass managers and onnxscript's rewriter."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from conftest import MODELS, bundled
from onnx_ir.passes.common import (
    CheckerPass,
    RemoveUnusedNodesPass,
    RemoveUnusedOpsetsPass,
    TopologicalSortPass,
)

import opshift
from opshift.plugins.onnx_ir import ConvertOpsetPass, FixPass, FusePass, InlinePass
from opshift.plugins.onnxscript import rules
from opshift.verify import verify

ACT = {"PRelu", "LeakyRelu", "Selu"}


def _ops(model: onnx.ModelProto) -> set[str]:
    return {n.op_type for n in model.graph.node}


def _npz_inputs(name: str) -> dict[str, np.ndarray]:
    return bundled(name)[1]


@pytest.mark.parametrize("name", ["prelu6_conv_per_channel", "selu1_defaults", "small_cnn"])
def test_pass_manager_composes_opshift_and_onnx_ir_passes(name):
    original = onnx.load(MODELS / f"{name}.onnx")
    model = ir.serde.deserialize_model(original)
    pm = ir.passes.PassManager([
        FixPass(), ConvertOpsetPass(13), InlinePass(), RemoveUnusedNodesPass(),
        TopologicalSortPass(), FusePass(), RemoveUnusedOpsetsPass(), CheckerPass(full_check=True),
    ])
    result = pm(model)
    assert result.modified
    out = ir.serde.serialize_model(result.model)
    assert out.opset_import[0].version == 13
    assert _ops(out) & ACT == _ops(original) & ACT  # inlined, then fused back
    assert verify(original, out, _npz_inputs(name)).ok


def test_modified_is_truthful():
    model = ir.load(MODELS / "prelu16.onnx")
    opset = model.opset_imports[""]
    assert not ConvertOpsetPass(opset)(model).modified
    assert not FusePass()(model).modified  # nothing decomposed to fuse
    assert not FixPass()(model).modified  # nothing to fix
    assert InlinePass()(model).modified
    assert FusePass()(model).modified


def test_rules_work_in_onnxscript_rewrite_alone_and_with_default_rules():
    from onnxscript import rewriter

    original = onnx.load(MODELS / "prelu16.onnx")
    inlined = opshift.inline(original)
    assert not _ops(inlined) & ACT
    alone = rewriter.rewrite(inlined, pattern_rewrite_rules=rules())
    assert "PRelu" in _ops(alone)
    both = rewriter.rewrite(
        inlined,
        pattern_rewrite_rules=[*rewriter._DEFAULT_REWRITE_RULES, *rules()])
    assert "PRelu" in _ops(both)
    for m in (alone, both):
        assert verify(original, m, _npz_inputs("prelu16")).ok


@pytest.mark.parametrize("name", ["small_cnn", "prelu16", "selu6"])
def test_onnxscript_optimizer_then_opshift_keeps_numbers(name):
    import onnxscript.optimizer

    original = onnx.load(MODELS / f"{name}.onnx")
    optimized = onnxscript.optimizer.optimize(original)
    model = ir.serde.deserialize_model(optimized)
    ir.passes.PassManager([ConvertOpsetPass(11), InlinePass(), FusePass()])(model)
    out = ir.serde.serialize_model(model)
    onnx.checker.check_model(out, full_check=True)
    assert verify(original, out, _npz_inputs(name)).ok


def test_fuse_without_candidate_ops_returns_an_equal_copy():
    original = onnx.load(MODELS / "prelu16.onnx")  # Conv-free, PRelu only: nothing to fuse
    fused = opshift.fuse(original)
    assert fused is not original
    assert fused.SerializeToString() == original.SerializeToString()
