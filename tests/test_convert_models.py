"""Whole models through ``convert``: the exported CNN and the bundled sample models, with
expected outputs computed independently of opshift (tests/data/export_cnn.py,
models/generate.py)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from conftest import MODELS, ROOT, bundled

from opshift import opsets
from opshift.errors import ConversionError
from opshift.evaluator import evaluate
from opshift.passes.convert import convert

DATA = ROOT / "tests" / "data"


@pytest.mark.parametrize("name", ["cnn_opset17.onnx", "cnn_opset20.onnx"])
@pytest.mark.parametrize("target", [9, 11, 13, 16, 21])
def test_exported_cnn_converts_and_keeps_numbers(name, target):
    ref = np.load(DATA / "cnn_ref.npz")
    m = onnx.load(DATA / name)
    out = convert(m, target)
    onnx.checker.check_model(out, full_check=True)
    assert opsets.opset_of(out) == target
    got = evaluate(out, {"x": ref["x"]})["y"]
    np.testing.assert_allclose(got, ref["y"], rtol=1e-5, atol=1e-5)
    if target <= 26:
        import onnxruntime as ort

        sess = ort.InferenceSession(out.SerializeToString(), providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(sess.run(None, {"x": ref["x"]})[0], ref["y"], rtol=1e-4,
                                   atol=1e-5)


SAMPLES = sorted(p.stem for p in MODELS.glob("*.onnx"))


def _close(got: np.ndarray, want: np.ndarray, selu: bool) -> bool:
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if g.shape != w.shape:
        return False
    if not selu:
        return bool(np.array_equal(g, w, equal_nan=True))
    scale = np.maximum(np.abs(np.nan_to_num(w)), 1.0)
    ulp = 2.0 ** -(7 if want.dtype == ml_dtypes.bfloat16 else 10 if want.dtype == np.float16
                   else 23)
    with np.errstate(invalid="ignore"):  # inf - inf where both are the same infinity
        return bool(np.all((np.isnan(g) & np.isnan(w)) | (g == w)
                           | (np.abs(g - w) <= 8 * ulp * scale)))


@pytest.mark.parametrize("name", SAMPLES)
def test_bundled_models_every_target(name):
    """Every bundled model to every opset: converted, checked, same numbers as the
    independent expectations -- or a one-line ConversionError naming a node."""
    m, ins, outs = bundled(name)
    selu = any(n.op_type == "Selu" for n in m.graph.node) or bool(m.functions)
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
        got = evaluate(out, ins)
        for k, want in outs.items():
            assert _close(got[k], want, selu), (name, target, k)
    assert converted >= 10, name
