"""Fresh, readable names that no node or value of the model uses yet."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain

import onnx

from .scopes import may_hold_subgraphs, subgraphs


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
    """Fresh, readable, unique names: ``fresh('prelu_3/neg_mask')``.

    A name in use is either in the set ``_used`` or *claimed*: inline's emitters take all
    the names of a replacement, ``base + suffix`` for each of its suffixes, by recording
    ``_claims[base] = suffixes`` (see :meth:`claim`). Each suffix is "/" and a text without
    "/", so a claimed name's base is its part before the last "/". A 1,000-node inline makes
    some 2,000 names: adding them to ``_used`` grew it to a 256 KiB table and kept 130 KiB of
    strings, several times what the rest of the pass allocates (on a fresh heap every new
    4 KiB costs a page fault).
    """

    def __init__(self, model: onnx.ModelProto):
        self._used = all_names(model)
        self._claims: dict[str, tuple[str, ...]] = {}

    @classmethod
    def from_used(cls, used: set[str]) -> Names:
        """Names avoiding ``used`` (a set a pass already collected; it is extended)."""
        names = cls.__new__(cls)
        names._used = used
        names._claims = {}
        return names

    def __contains__(self, name: str) -> bool:
        if name in self._used:
            return True
        if self._claims:
            base, sep, tail = name.rpartition("/")
            return bool(sep) and "/" + tail in self._claims.get(base, ())
        return False

    def fresh(self, base: str) -> str:
        name, i = base, 1
        while name in self:
            name = f"{base}_{i}"
            i += 1
        self._used.add(name)
        return name

    def claim(self, base: str, suffixes: tuple[str, ...]) -> bool:
        """Take every ``base + suffix`` at once if all are free and ``base`` has claimed
        nothing yet; False (nothing taken) otherwise. Each suffix must be "/" and a text
        without "/" (:func:`claimable`)."""
        if base in self._claims or not self._used.isdisjoint([base + s for s in suffixes]):
            return False
        self._claims[base] = suffixes
        return True


def claimable(suffixes: Iterable[str]) -> bool:
    """Suffixes :meth:`Names.claim` can take: each "/" and a text without "/"."""
    return all(s[:1] == "/" and "/" not in s[1:] for s in suffixes)
