"""Whole models through ``convert``: the exported CNN and the bundled sample models, with
expected outputs computed independently of opshift (tests/data/export_cnn.py,
models/generate.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import MODELS, ROOT, assert_outputs_exact, bundled, run_onnxruntime

from opshift import opsets
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.passes.convert import convert

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


#: The open bfloat16 Selu difference (README, Development; test_convert_cli.py tracks the CLI
#: side): below opset 22 convert computes bfloat16 Selu in float32 between Casts, while the
#: evaluator runs the original Selu-22 by its function body, rounding to bfloat16 after every
#: step. On this model's inputs, at every target 13..21, x = -0.000999451 gives +0.0 (original)
#: and -0.00174713 (converted), x = -0.227539 gives -0.351562 and -0.355469.
OPEN = {"selu22_bf16": "open: bfloat16 Selu-22 converted below 22 differs from its per-step "
                       "bfloat16 function body near 0 (+0.0 vs -0.00174713 at x=-0.000999451)"}
SAMPLES = [pytest.param(p.stem, marks=pytest.mark.xfail(strict=True, raises=AssertionError,
                                                        reason=OPEN[p.stem]))
           if p.stem in OPEN else p.stem for p in sorted(MODELS.glob("*.onnx"))]


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
