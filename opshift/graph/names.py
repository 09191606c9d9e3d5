"""Fresh, readable names that no node or value of the model uses yet."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain

import onnx

from opshift.graph.scopes import may_hold_subgraphs, subgraphs


def all_names(model: onnx.ModelProto) -> set[str]:
    """Every node name and value name used anywhere in the model."""
    names: set[str] = set()

    def graph(g: onnx.GraphProto) -> None:
        names.update(v.name for v in g.input)
        names.update(v.name for v in g.output)
        names.update(t.name for t in g.initializer)
        nodes(g.node)

    def nodes(ns) -> None:
        names.update(n.name for n in ns)
        names.update(chain.from_iterable(n.output for n in ns))
        holders = {o for o, d in {(n.op_type, n.domain) for n in ns} if may_hold_subgraphs(d, o)}
        for n in ns if holders else ():
            if n.op_type in holders:
                for _, g in subgraphs(n):
                    graph(g)

    graph(model.graph)
    for f in model.functions:
        names.update(f.input)
        names.update(f.output)
        nodes(f.node)
    names.discard("")
    return names


class Names:
    """Fresh, readable, unique names: ``fresh('prelu_3/neg_mask')``."""

    def __init__(self, model: onnx.ModelProto):
        self._used = all_names(model)
        #: base -> the next suffix to try: names are only ever added, so every suffix below
        #: it is taken, and a base asked for again (a slope shared by many PRelus) does not
        #: walk its earlier suffixes again
        self._next: dict[str, int] = {}

    @classmethod
    def from_used(cls, used: set[str]) -> Names:
        """Names avoiding ``used`` (a set a pass already collected; it is extended)."""
        names = cls.__new__(cls)
        names._used = used
        names._next = {}
        return names

    def __contains__(self, name: str) -> bool:
        return name in self._used

    def fresh(self, base: str) -> str:
        """``base``, or ``base_1``, ``base_2``, ... if it is in use; taken from then on."""
        name, i = base, self._next.get(base, 1)
        while name in self._used:
            name = f"{base}_{i}"
            i += 1
        if name != base:
            self._next[base] = i
        self._used.add(name)
        return name

    def fresh_all(self, base: str, suffixes: Iterable[str]) -> list[str]:
        """:meth:`fresh` of ``base + suffix`` for each suffix, in order."""
        used, out = self._used, []
        for suffix in suffixes:
            name = base + suffix
            if name in used:
                name = self.fresh(name)
            else:
                used.add(name)
            out.append(name)
        return out
