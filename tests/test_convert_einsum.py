"""Einsum below 12 where it sums nothing (outer and broadcast products, transposes): a Mul of
its inputs placed by Transpose and Unsqueeze, or a Transpose; bit for bit against Einsum-12
on the evaluator, with numpy's einsum as the meaning, and on onnxruntime where it runs.
Contractions, diagonals, ellipses and three inputs stay refused."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_conversion_exact, converted, make_model, vi
from onnx import TensorProto as T
from onnx import helper

from opshift.errors import ConversionError
from opshift.passes.convert import convert_proto

DIMS = {"i": 3, "j": 4, "b": 2, "k": 5}


def _model(equation: str, elem: int = T.FLOAT) -> tuple[onnx.ModelProto, list]:
    terms = equation.replace(" ", "").split("->")[0].split(",")
    shapes = [[DIMS[c] for c in t] for t in terms]
    names = [f"x{k}" for k in range(len(terms))]
    out = np.einsum(equation, *(np.zeros(s) for s in shapes)).shape
    m = make_model([helper.make_node("Einsum", names, ["y"], equation=equation)],
                   [vi(n, elem, s) for n, s in zip(names, shapes)], [vi("y", elem, out)],
                   opset=12)
    return m, shapes


@pytest.mark.parametrize("target", [11, 9, 7])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int64])
@pytest.mark.parametrize("equation", ["i, j -> i j", "ij,i->ji", "bi,ij->bji", "ij->ji",
                                      "ij", "j,i", "ji,ij->ij"])
def test_einsum_without_sums_below_12(equation, dtype, target):
    m, shapes = _model(equation, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    c = converted(m, target)
    assert "Einsum" not in {n.op_type for n in c.graph.node}
    rng = np.random.default_rng(4)
    feeds = {f"x{k}": (rng.standard_normal(s) * 100).astype(dtype) for k, s in
             enumerate(shapes)}
    with np.errstate(all="ignore"):  # (1e30 is inf in float16)
        feeds["x0"].reshape(-1)[:3] = [0, 7, 7] if dtype == np.int64 else [0, -0.0, 1e30]
        meaning = np.einsum(equation, *feeds.values())
    assert_conversion_exact(m, c, feeds, meaning)


@pytest.mark.parametrize("equation, pattern", [
    ("ij,jk->ik", r"sums over 'j'"), ("ii->i", r"index twice"), ("...i,i->...i", "ellipsis"),
    ("i,j,k->ijk", r"3 inputs"), ("i,i", r"sums over 'i'")])
def test_einsum_that_sums_or_needs_more_is_refused_below_12(equation, pattern):
    terms = equation.split("->")[0].split(",")
    shapes = [[3] * len(t.replace(".", "")) for t in terms]
    names = [f"x{k}" for k in range(len(terms))]
    m = make_model([helper.make_node("Einsum", names, ["y"], equation=equation)],
                   [vi(n, T.FLOAT, s) for n, s in zip(names, shapes)], [vi("y", T.FLOAT, None)],
                   opset=12)
    with pytest.raises(ConversionError, match=pattern):
        convert_proto(m, 11)
