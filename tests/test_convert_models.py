"""Whole models through ``convert``: the exported CNN and the bundled sample models, with
expected outputs computed independently of opshift (tests/data/export_cnn.py,
models/generate.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import MODELS, ROOT, assert_outputs_exact, bundled, run_onnxruntime

from opshift import opsets
from opshift.convert import convert
from opshift.errors import ConversionError
from opshift.evaluator import evaluate

DATA = ROOT / "tests" / "data"


@pytest.mark.parametrize("name", ["cnn_opset17.onnx", "cnn_opset20.onnx"])
@pytest.mark.parametrize("target", [9, 11, 13, 16, 21])
def test_exported_cnn_converts_and_keeps_numbers(name, target):
    """Converted: bit for bit what the original computes; and both within float32 rounding
    of PyTorch's outputs (another implementation of Conv and Gemm sums in another order)."""
    ref = np.load(DATA / "cnn_ref.npz")
    m = onnx.load(DATA / name)
    out = convert(m, target)
    onnx.checker.check_model(out, full_check=True)
    assert opsets.opset_of(out) == target
    want = evaluate(m, {"x": ref["x"]})
    got = evaluate(out, {"x": ref["x"]})
    assert_outputs_exact(want, got, f"{name} to opset {target}")
    np.testing.assert_allclose(got["y"], ref["y"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run_onnxruntime(out, {"x": ref["x"]})[0], ref["y"], rtol=1e-4,
                               atol=1e-5)


SAMPLES = [p.stem for p in sorted(MODELS.glob("*.onnx"))]


@pytest.mark.parametrize("name", SAMPLES)
def test_bundled_models_every_target(name):
    """Every bundled model to every opset: converted, checked, bit for bit the numbers the
    original computes (test_models.py checks those against the independent expectations) --
    or a one-line ConversionError naming a node."""
    m, ins, _ = bundled(name)
    want = evaluate(m, ins)
    converted = 0
    for target in range(1, opsets.MAX_OPSET + 1):
        try:
            out = convert(m, target)
        except ConversionError as e:
            msg = str(e)
            assert "\n" not in msg and "node '" in msg, msg
            continue
        converted += 1
        onnx.checker.check_model(out, full_check=True)
        assert_outputs_exact(want, evaluate(out, ins), f"{name} to opset {target}")
    assert converted >= 10, name
