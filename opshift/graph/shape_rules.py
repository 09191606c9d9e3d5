"""Output shapes by each op's own definition, and the walk that applies them lazily.

A rule (one per op, in :data:`RULES`, complete once :func:`rules` is called) receives an
:class:`Ask` -- the node, the op's schema version in force, its inputs' shapes and small
constants -- and returns the shape of the node's first output: a tuple of dims (an int, a
symbolic name, or None for a dim it cannot be sure of), or None when even the rank is
unknown. A rule says only what the op's definition fixes: ``Gemm`` is 2-D whatever its
inputs, ``Flatten`` too, ``Reshape`` has as many dims as its shape has entries.
:func:`merge` takes the more informative of two answers and never contradicts the first;
:class:`~opshift.graph.shape_walk.ShapeWalk` applies the rules. Here: arithmetic,
contractions, reductions, recurrences and If; :mod:`.layout_rules`: the ops that move or
select data (Reshape, Transpose, Slice, Gather, Concat, ...); :mod:`.window_rules`: Conv and
the pools.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from opshift.graph.scopes import subgraphs

Dim = int | str | None
Shape = tuple[Dim, ...]
Rule = Callable[["Ask"], Shape | None]

#: op -> rule, for default-domain ops
RULES: dict[str, Rule] = {}


def rule(*ops: str) -> Callable[[Rule], Rule]:
    def register(fn: Rule) -> Rule:
        for op in ops:
            RULES[op] = fn
        return fn
    return register


#: ops whose rule answers for every output (the others' rules: the first output only)
ALL_OUTPUTS = frozenset({"LSTM", "GRU", "RNN", "If"})


@dataclass(slots=True)
class Ask:
    """What a rule reads: ``node`` at schema ``version``; ``shape_of`` and ``const_of`` answer
    for value names (a constant: its array, None when computed or not loaded); ``output``:
    which output is asked for (0 but for :data:`ALL_OUTPUTS`)."""

    node: onnx.NodeProto
    version: int
    shape_of: Callable[[str], Shape | None]
    const_of: Callable[[str], np.ndarray | None]
    output: int = 0

    def attr(self, name: str, default=None):
        for a in self.node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    def shape(self, i: int) -> Shape | None:
        ins = self.node.input
        return self.shape_of(ins[i]) if i < len(ins) and ins[i] else None

    def ints(self, i: int, attr: str | None = None) -> list[int] | None:
        """Integers from attribute ``attr`` if the node has it, else from constant input ``i``
        (None when that input is computed, [] when there is neither)."""
        v = self.attr(attr) if attr else None
        if v is not None:
            return [int(a) for a in v]
        ins = self.node.input
        if i >= len(ins) or not ins[i]:
            return []
        c = self.const_of(ins[i])
        return None if c is None else [int(a) for a in np.asarray(c).ravel()]


def merge(a: Shape | None, b: Shape | None) -> Shape | None:
    """``a`` with each dim it does not know taken from ``b`` (an int over a name over None);
    ``a`` as it is where the two disagree on the rank or on a known dim."""
    if a is None:
        return b
    if b is None or len(a) != len(b):
        return a
    return tuple(x if isinstance(x, int) or (x is not None and not isinstance(y, int))
                 else y for x, y in zip(a, b))


def complete(s: Shape | None) -> bool:
    """Every dim an int."""
    return s is not None and all(isinstance(d, int) for d in s)


#: How onnx's shape inference (and tf2onnx) names a dim nobody knows: a fresh name per dim,
#: which says no more than None, so the rules may still find its size.
MADE_UP = "unk__"


def known(s: Shape | None) -> bool:
    """Every dim an int or a name (what the rules add is for dims nothing else knows), but
    a made-up one (:data:`MADE_UP`)."""
    return s is not None and all(
        type(d) is int or (d is not None and not d.startswith(MADE_UP)) for d in s)


def axis_index(axis: int, rank: int) -> int | None:
    """``axis`` (negative counts from the end) as a position in a shape of ``rank`` dims;
    None when it is out of range."""
    a = axis + rank if axis < 0 else axis
    return a if 0 <= a < rank else None


def _broadcast_dim(dims: list[Dim]) -> Dim:
    """numpy's rule: a dim other than 1 wins; a name only when no other name or None is
    there (a name or None may stand for 1)."""
    ints = {d for d in dims if isinstance(d, int) and d != 1}
    if ints:
        return ints.pop() if len(ints) == 1 else None
    others = {d for d in dims if not isinstance(d, int)}
    if not others:
        return 1
    return others.pop() if len(others) == 1 and None not in others else None


def broadcast(shapes: list[Shape | None]) -> Shape | None:
    """The multidirectional (numpy) broadcast of ``shapes``."""
    if not shapes or any(s is None for s in shapes):
        return None
    r = max(len(s) for s in shapes)
    return tuple(_broadcast_dim([s[k - r + len(s)] for s in shapes if k - r + len(s) >= 0])
                 for k in range(r))


def fits_into(small: Shape, big: Shape | None) -> bool:
    """Whether a value of shape ``small`` broadcasts into ``big`` without widening it: each
    of its dims 1, or the same int or name as ``big``'s (a scalar fits any shape)."""
    if not small:
        return True
    return big is not None and len(small) <= len(big) and all(
        d == 1 or (d is not None and d == e) for d, e in zip(small[::-1], big[::-1]))


def same_shape(shapes: list[Shape | None]) -> Shape | None:
    """The one shape of inputs that must have one shape: what any of them says (merged)."""
    out = None
    for s in shapes:
        out = merge(out, s)
    return out


def dims_product(dims) -> Dim:
    """The product of ``dims``: an int when all are, the one name when it is alone among
    1s."""
    rest = [d for d in dims if d != 1]
    if not rest:
        return 1
    if all(isinstance(d, int) for d in rest):
        return int(np.prod(rest, dtype=np.int64))
    if 0 in rest:
        return 0
    return rest[0] if len(rest) == 1 else None


def dims_quotient(total: Shape, part: list[Dim]) -> Dim:
    """prod(total) / prod(part) where names cancel; None if it cannot be told."""
    if any(d is None for d in (*total, *part)):
        return None
    names = Counter(d for d in total if isinstance(d, str))
    names.subtract(d for d in part if isinstance(d, str))
    if any(v < 0 for v in names.values()):
        return None
    num = int(np.prod([d for d in total if isinstance(d, int)], dtype=np.int64))
    den = int(np.prod([d for d in part if isinstance(d, int)], dtype=np.int64))
    if den == 0 or num % den:
        return None
    left = [n for n, v in names.items() for _ in range(v)]
    if not left:
        return num // den
    return left[0] if len(left) == 1 and num == den else None


_UNARY = (
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BatchNormalization",
    "BitwiseNot", "Cast", "CastLike", "Ceil", "Celu", "Clip", "Cos", "Cosh", "Dropout", "Elu",
    "Erf", "Exp", "Floor", "Gelu", "HardSigmoid", "HardSwish", "Hardmax", "Identity",
    "InstanceNormalization", "IsInf", "IsNaN", "LayerNormalization", "LeakyRelu", "Log",
    "LogSoftmax", "LpNormalization", "LRN", "MeanVarianceNormalization", "Mish", "Neg", "Not",
    "PRelu", "Reciprocal", "Relu", "Round", "Selu", "Shrink", "Sigmoid", "Sign", "Sin", "Sinh",
    "Softmax", "Softplus", "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu",
    # output 0 shaped as input 0 too
    "Cumsum", "Trilu", "ReverseSequence", "Scatter", "ScatterElements", "ScatterND",
    "QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear",
)


@rule(*_UNARY)
def _like_input(a: Ask) -> Shape | None:
    # PRelu: the slope broadcasts to X (unidirectionally); normalizations: output 0 is X's
    return a.shape(0)


_LEGACY_BROADCAST = (  # a ``broadcast`` attribute before version 7
    "Add", "Sub", "Mul", "Div", "Pow", "And", "Or", "Xor", "Equal", "Greater", "Less",
)


@rule(*_LEGACY_BROADCAST, "BitShift", "Mod", "GreaterOrEqual", "LessOrEqual", "Where",
      "BitwiseAnd", "BitwiseOr", "BitwiseXor")
def _binary(a: Ask) -> Shape | None:
    shapes = [a.shape(i) for i in range(len(a.node.input))]
    if a.node.op_type in _LEGACY_BROADCAST and a.version < 7:
        if a.attr("broadcast", 0):
            return shapes[0]  # B broadcasts to A
        return same_shape(shapes)
    return broadcast(shapes)


@rule("Max", "Min", "Sum", "Mean")
def _variadic(a: Ask) -> Shape | None:
    shapes = [a.shape(i) for i in range(len(a.node.input))]
    return same_shape(shapes) if a.version < 8 else broadcast(shapes)


@rule("Gemm")
def _gemm(a: Ask) -> Shape:
    sa, sb, sc = a.shape(0), a.shape(1), a.shape(2)
    m = sa[1 if a.attr("transA", 0) else 0] if sa is not None and len(sa) == 2 else None
    n = sb[0 if a.attr("transB", 0) else 1] if sb is not None and len(sb) == 2 else None
    out = [m, n]
    if sc is not None and len(sc) <= 2:  # C broadcasts to (M, N): a dim other than 1 is it
        for k, d in zip(range(2 - len(sc), 2), sc):
            if isinstance(d, int) and d != 1 and out[k] is None:
                out[k] = d
    return tuple(out)


@rule("MatMul")
def _matmul(a: Ask) -> Shape | None:
    sa, sb = a.shape(0), a.shape(1)
    if not sa or not sb:
        return None
    xa = (1, *sa) if len(sa) == 1 else sa
    xb = (*sb, 1) if len(sb) == 1 else sb
    batch = broadcast([xa[:-2], xb[:-2]]) or ()
    return (*batch, *(() if len(sa) == 1 else (xa[-2],)), *(() if len(sb) == 1 else (xb[-1],)))


_REDUCE = ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMax", "ReduceMean",
           "ReduceMin", "ReduceProd", "ReduceSum", "ReduceSumSquare")


@rule(*_REDUCE, "ArgMax", "ArgMin")
def _reduce(a: Ask) -> Shape | None:
    """X's dims but the reduced ones: 1 with keepdims (the default), dropped without; no
    axes reduce every axis, or none with noop_with_empty_axes."""
    x = a.shape(0)
    if x is None:
        return None
    keep = a.attr("keepdims", 1)
    if a.node.op_type in ("ArgMax", "ArgMin"):
        axes: list[int] | None = [a.attr("axis", 0)]
    else:
        axes = a.ints(1, "axes")
        if axes == []:
            if a.attr("noop_with_empty_axes", 0):
                return x
            axes = list(range(len(x)))
    if axes is None:  # computed axes: the rank with keepdims, else nothing
        return (None,) * len(x) if keep else None
    ks = {axis_index(k, len(x)) for k in axes}
    if None in ks:
        return None
    return tuple(1 if i in ks else d for i, d in enumerate(x) if keep or i not in ks)


@rule("LSTM", "GRU", "RNN")
def _recurrent(a: Ask) -> Shape | None:
    """Y ``[seq, directions, batch, hidden]``, Y_h and Y_c ``[directions, batch, hidden]``
    (batch first with layout=1, from 14); hidden from the attribute, else from W."""
    x, w = a.shape(0), a.shape(1)
    hidden = a.attr("hidden_size")
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[a.node.op_type]
    if hidden is None and w is not None and len(w) == 3 and isinstance(w[1], int):
        hidden = w[1] // gates
    direction = a.attr("direction", b"forward")
    dirs = 2 if direction in (b"bidirectional", "bidirectional") else 1
    first = a.attr("layout", 0) == 1
    seq, batch = (None, None) if x is None or len(x) != 3 else (x[1], x[0]) if first \
        else (x[0], x[1])
    if a.output == 0:
        return (batch, seq, dirs, hidden) if first else (seq, dirs, batch, hidden)
    return (batch, dirs, hidden) if first else (dirs, batch, hidden)


def reads(node: onnx.NodeProto) -> list[str]:
    """The values ``node``'s rule reads the shapes of: its inputs, and an If's branch
    outputs."""
    if node.op_type != "If":
        return list(node.input)
    return [o.name for _, g in subgraphs(node) for o in g.output]


@rule("If")
def _if(a: Ask) -> Shape | None:
    """The dims both branches give output ``output`` in (an If gives one of the two)."""
    branches = [g for _, g in subgraphs(a.node)]
    if len(branches) != 2:
        return None
    s, t = (a.shape_of(g.output[a.output].name) for g in branches)
    if s is None or t is None or len(s) != len(t):
        return None
    return tuple(x if x == y else None for x, y in zip(s, t))


def output_shape(node: onnx.NodeProto, version: int, shape_of, const_of, output: int = 0
                 ) -> Shape | None:
    """The shape of ``node``'s output ``output`` (the first but for :data:`ALL_OUTPUTS`) by
    its op's rule (None: no rule, or unknown)."""
    fn = rules().get(node.op_type)
    if fn is None:
        return None
    try:
        return fn(Ask(node, version, shape_of, const_of, output))
    except (IndexError, TypeError, ValueError, StopIteration):
        return None  # a malformed node: what the rule reads does not fit the definition



@functools.cache
def rules() -> dict[str, Rule]:
    """:data:`RULES`, complete: the rules of the ops that move or select data
    (:mod:`.layout_rules`) and of the sliding windows (:mod:`.window_rules`) register
    themselves on import, done here on first use (a model whose shapes are declared or
    inferred never asks a rule: fix, inspect and convert need not load them)."""
    from opshift.graph import layout_rules, window_rules  # noqa: F401

    return RULES
