"""Shape arithmetic of a written function body, folded to constants.

A schema's function body often computes what an older opset needs as an attribute: the
RMSNormalization and LayerNormalization bodies build ReduceMean's axes as
``Range(axis, Size(Shape(X)), 1)``, which ReduceMean below 18 takes only as a constant. The
rank of X is known whenever X's shape is, even with symbolic dims (``[batch, seq, 4096]``),
so ``Size(Shape(X))`` is a constant, and so is every node computed from small integer
constants only through ops every runtime computes alike (the one table of them,
:data:`opshift.graph.constant_values.FOLDABLE`, but for those whose output's size is read from
values, Range's bounded first). Folding them makes the body convertible where it was refused;
the values are the ones the nodes compute (run by the bundled evaluator, through
:func:`opshift.graph.constant_values.evaluate`), so the body still computes exactly what the op
does. Dims themselves are never folded: a declared dim can be a placeholder.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from opshift.convert.step import Step
from opshift.graph.constant_values import FOLDABLE, SIZED_BY_VALUES, evaluate

#: the most elements a folded value may have (axes, shapes: a few)
_LARGEST = 64


def fold_shape_arithmetic(st: Step, nodes: list[onnx.NodeProto], opset: int
                          ) -> list[onnx.NodeProto]:
    """``nodes`` (a body written for ``st``'s node, valid at ``opset``) with every node
    computing a small integer or boolean value from constants and ranks replaced by a
    Constant of that value, and the nodes nothing reads any more left out."""
    known: dict[str, np.ndarray] = {}
    ranks: dict[str, int] = {}  # output of Shape -> its length, when X's rank is known
    out = []
    for n in nodes:
        value = _fold(st, n, opset, known, ranks)
        if value is None:
            out.append(n)
            continue
        known[n.output[0]] = value
        out.append(helper.make_node("Constant", [], [n.output[0]], name=n.name,
                                    value=numpy_helper.from_array(value, n.output[0])))
    if not known:
        return out
    read = {o for o in st.w.output if o}
    live = []
    for n in reversed(out):  # (a body computes nothing but its outputs)
        if any(o in read for o in n.output):
            live.append(n)
            read.update(n.input)
    return live[::-1]


def _fold(st: Step, n: onnx.NodeProto, opset: int, known: dict[str, np.ndarray],
          ranks: dict[str, int]) -> np.ndarray | None:
    op = n.op_type
    if n.domain not in ("", "ai.onnx") or len(n.output) != 1:
        return None
    if op == "Constant":
        from opshift.graph.scopes import constant_tensor

        c = constant_tensor(n)
        if c is not None and _small(c.dims):
            known[n.output[0]] = numpy_helper.to_array(c)
        return None
    if op == "Shape":
        rank = st.rank(n.input[0])
        if rank is not None:
            attrs = {a.name: a.i for a in n.attribute}
            ranks[n.output[0]] = len(range(rank)[attrs.get("start", 0):attrs.get("end", rank)])
        return None
    if op == "Size" and n.input[0] in ranks:
        return np.array(ranks[n.input[0]], np.int64)
    # (its inputs are integers, so the ops FOLDABLE takes on integers only are foldable too;
    # a Range's length is bounded below, from its constants)
    if op not in FOLDABLE or (op in SIZED_BY_VALUES and op != "Range"):
        return None
    values = []
    for name in n.input:
        if not name:
            values.append(None)
            continue
        v = known.get(name)
        if v is None:
            v = st.const(name)
            if v is None or not _small(v.shape) or v.dtype.kind not in "biu":
                return None
        values.append(v)
    if not values:
        return None
    if op == "Range" and len(values) == 3 and all(v is not None for v in values):
        start, limit, delta = (int(np.asarray(v).reshape(-1)[0]) for v in values)
        if delta == 0 or max(0, -(-(limit - start) // delta)) > _LARGEST:
            return None  # (a hostile attribute would have the evaluator make it whole)
    return _run(n, opset, values)


def _small(shape) -> bool:
    return len(shape) <= 1 and int(np.prod(shape, dtype=np.int64)) <= _LARGEST


def _run(n: onnx.NodeProto, opset: int, values: list) -> np.ndarray | None:
    """``n`` run by the bundled evaluator on constant ``values`` (the one evaluator of
    constants, :func:`opshift.graph.constant_values.evaluate`); None when it fails or gives
    anything but a small integer or boolean tensor."""
    leaves = {name: numpy_helper.from_array(v, name)
              for name, v in zip(n.input, values) if v is not None}
    t = evaluate({"": opset}, n.output[0], [n], leaves)
    out = None if t is None else numpy_helper.to_array(t)
    if out is None or out.dtype.kind not in "biu" or not _small(out.shape):
        return None
    return out
