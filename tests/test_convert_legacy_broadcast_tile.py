"""Legacy broadcasting (opset < 7) of an A whose dims of 1 meet B's known sizes while the
output shape is symbolic, e.g. ``(n, 1) + (5,)``: A is tiled by constant repeats (a Tile from
opset 6, a Tile-1 per axis below), its symbolic dims kept, then B is placed with
``broadcast=1``/``axis``. Bit for bit against the original on the evaluator for several n
(0 and 1 included), with numpy's broadcasting as the meaning; onnxruntime runs none of these
targets (below 7)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import assert_conversion_exact, converted, make_model, vi
from onnx import TensorProto as T
from onnx import helper

from opshift.errors import ConversionError

MEANING = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
           "Greater": np.greater, "Less": np.less}
SPECIAL = np.array([np.nan, -0.0, 0.0, np.inf, -np.inf, 1.5, -3.25, 7.0], np.float32)


def _model(op: str, sa, sb, elem=T.FLOAT) -> onnx.ModelProto:
    out = T.BOOL if op in ("Greater", "Less") else elem
    r = max(len(sa), len(sb))
    pa, pb = ((1,) * (r - len(s)) + tuple(s) for s in (sa, sb))
    shape = [b if a == 1 else a for a, b in zip(pa, pb)]  # (the declared output: IR 3 wants one)
    return make_model([helper.make_node(op, ["a", "b"], ["y"])],
                      [vi("a", elem, list(sa)), vi("b", elem, list(sb))], [vi("y", out, shape)],
                      opset=13)


def _values(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    if np.dtype(dtype).kind == "f":
        return rng.choice(SPECIAL, size=shape).astype(dtype)
    return rng.integers(-50, 50, size=shape).astype(dtype)


def _check(op, sa, sb, target, rng, ns=(0, 1, 3), dtype=np.float32) -> onnx.ModelProto:
    m = _model(op, sa, sb, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))
    c = converted(m, target)
    ops = [n.op_type for n in c.graph.node]
    assert "Tile" in ops, ops
    for n in ns:
        a, b = (_values(rng, [n if d == "n" else d for d in s], dtype) for s in (sa, sb))
        meaning = None  # (integer Div truncates: the original on the evaluator is the meaning)
        if np.dtype(dtype).kind == "f" or op != "Div":
            with np.errstate(all="ignore"):
                meaning = np.asarray(MEANING[op](a, b))
        assert_conversion_exact(m, c, {"a": a, "b": b}, meaning)
    return c


SHAPES = [(("n", 1), (5,)), (("n", 1, 1), (3, 4)), (("n", 1, 4), (3, 1)), ((1, "n", 1), (2, 1, 1)),
          (("n", 1, 3), (1, 4, 3))]  # (the last: both broadcast; B read without its outer 1)


@pytest.mark.parametrize("target", [6, 1])
@pytest.mark.parametrize("shapes", SHAPES, ids=lambda s: f"{s[0]}_{s[1]}")
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Greater"])
def test_symbolic_a_tiled_then_b_placed(op, shapes, target, rng):
    sa, sb = shapes
    c = _check(op, sa, sb, target, rng)
    node = c.graph.node[-1]
    assert node.op_type == op
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs.get("broadcast") == 1
    tiles = [n for n in c.graph.node if n.op_type == "Tile"]
    if target >= 6:
        assert len(tiles) == 1 and len(tiles[0].input) == 2
    else:  # Tile-1: one per tiled axis (tiles, axis)
        assert all(len(t.input) == 3 for t in tiles)


@pytest.mark.parametrize("target", [6, 1])
@pytest.mark.parametrize("op", ["Add", "Greater"])
def test_smaller_first_operand_trades_places(op, target, rng):
    """(5,) op (n, 1): the operands trade places (Greater as Less), then the same."""
    c = _check(op, (5,), ("n", 1), target, rng)
    assert c.graph.node[-1].op_type == {"Add": "Add", "Greater": "Less"}[op]


@pytest.mark.parametrize("op", ["Add", "Div"])
def test_integer_operands_at_6(op, rng):
    _check(op, ("n", 1), (5,), 6, rng, ns=(2,), dtype=np.int64)


def test_integer_operands_below_6_are_refused_by_the_op():
    """Add-1 takes floats only (so does Tile-1): refused, not tiled."""
    with pytest.raises(ConversionError):
        converted(_model("Add", ("n", 1), (5,), T.INT32), 5)


@pytest.mark.parametrize("sa, sb, why", [
    (("n",), (5,), "dim 0: n against 5"),  # n may be 1 or 5 at run time
    # tiled to (2, n, 5), B's 1 inside its run meets n
    ((1, "n", 1), (2, 1, 5), "the other operand then: dim 1 is 1 against n"),
    (("n", 1), ("m",), "dim 1: 1 against m"),  # m is not a known size
])
def test_not_tiled_where_not_exact(sa, sb, why):
    with pytest.raises(ConversionError, match=why):
        converted(_model("Add", sa, sb), 6)


def test_div_of_a_smaller_first_operand_stays_refused():
    """(5,) / (n, 1): Div cannot trade places, and (5,) has no dim of 1 to tile."""
    with pytest.raises(ConversionError, match="cannot be tiled"):
        converted(_model("Div", (5,), ("n", 1)), 6)
