"""The shape rules applied lazily: backwards from the value asked for, each value at most
once, stopping where another source (declared shapes, constants, onnx shape inference)
already knows every dim (see :mod:`.shape_rules`)."""

from __future__ import annotations

from collections.abc import Callable

import onnx

from opshift.graph.shape_rules import Shape, known, merge, output_shape, reads


class ShapeWalk:
    """Rule shapes merged into ``base`` shapes, for the values of one root (a graph with its
    subgraphs, or a function body), each value worked out at most once; a value whose
    base shape has every dim (an int or a name) is taken as it is.

    ``base(name)``: what other sources say; ``producer(name)``: (node, its op's version,
    constant lookup for its scope, which output the value is) for a value a rule covers.
    """

    def __init__(self, base: Callable[[str], Shape | None],
                 producer: Callable[[str], tuple[onnx.NodeProto, int, Callable, int] | None]):
        self._base = base
        self._producer = producer
        self._memo: dict[str, Shape | None] = {}

    def shape(self, name: str) -> Shape | None:
        memo = self._memo
        if name in memo:
            return memo[name]
        base = self._base(name)
        if known(base):  # most values: declared in full, nothing to work out
            memo[name] = base
            return base
        stack, opened, bases = [name], set(), {name: base}
        while stack:
            v = stack[-1]
            if v in memo:
                stack.pop()
                continue
            base = bases[v] if v in bases else bases.setdefault(v, self._base(v))
            p = None if known(base) else self._producer(v)
            if p is None:
                memo[v] = base
                stack.pop()
                continue
            node, version, const_of, output = p
            if v not in opened:  # first visit: the inputs first (a cycle is cut here)
                opened.add(v)
                todo = [i for i in reads(node) if i and i not in memo]
                if todo:
                    stack.extend(todo)
                    continue
            memo[v] = merge(base, output_shape(node, version, memo.get, const_of, output))
            stack.pop()
        return memo[name]
