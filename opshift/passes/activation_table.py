"""What changes between neighbouring versions of PRelu, LeakyRelu and Selu, and how to adapt.

Every entry is derived from ``onnx.defs`` (versions, attributes, defaults, allowed types) and
from :func:`opshift.broadcast.rule_for_version` (the PRelu slope rule), never retyped. A
future onnx release that adds a version or changes a default shows up here by itself.

A conversion from version ``a`` to version ``b`` applies, once each and with the endpoints
``a``/``b``, the adapters of every step it crosses (see :func:`plan`): all adapters are
functions of the two endpoint schemas, so composing steps is just taking their union.
"""

from __future__ import annotations

import enum
import functools
from dataclasses import dataclass

import numpy as np

from .. import opsets
from ..broadcast import SlopeRule, rule_for_version

#: Attributes a schema marks as a legacy hint without meaning ("legacy optimization
#: attribute"); removing them never changes the numbers.
MEANINGLESS_ATTRIBUTES = frozenset({"consumed_inputs"})


class Adapter(enum.Enum):
    """The rewrites a version step can need (implemented in :mod:`opshift.passes.convert`)."""

    DROP_ATTRIBUTES = "drop attributes the target does not define"
    MATERIALIZE_DEFAULTS = "write defaults whose value differs at the target explicitly"
    SLOPE_TO_NUMPY = "reshape a per-channel [C] slope to [C,1,...,1]"
    SLOPE_TO_LEGACY = "reshape the slope so legacy per-channel broadcasting reads it the same"
    CAST_TYPES = "run types the target does not allow in an exact wider type"


@dataclass(frozen=True)
class Step:
    """One neighbouring pair of schema versions of an op."""

    op: str
    lower: int
    upper: int
    attrs_only_lower: frozenset[str]
    attrs_only_upper: frozenset[str]
    default_changes: tuple[tuple[str, object, object], ...]  # (name, lower, upper default)
    types_only_lower: frozenset[str]
    types_only_upper: frozenset[str]
    slope_rules: tuple[SlopeRule, SlopeRule] | None  # (lower, upper) when they differ
    up: tuple[Adapter, ...]
    down: tuple[Adapter, ...]

    def changes(self) -> list[str]:
        """Human-readable list of what differs between the two versions."""
        out = []
        for a in sorted(self.attrs_only_lower):
            out.append(f"attribute {a!r} only in version {self.lower}")
        for a in sorted(self.attrs_only_upper):
            out.append(f"attribute {a!r} only in version {self.upper}")
        for name, lo, hi in self.default_changes:
            out.append(f"default {name}: {lo!r} -> {hi!r}")
        if self.types_only_upper:
            out.append(f"types added: {', '.join(sorted(self.types_only_upper))}")
        if self.types_only_lower:
            out.append(f"types removed: {', '.join(sorted(self.types_only_lower))}")
        if self.slope_rules:
            out.append(f"slope broadcasting: {self.slope_rules[0].value} -> "
                       f"{self.slope_rules[1].value}")
        return out


def _same_number(a: object, b: object) -> bool:
    """Attribute values equal as the float32 the attribute is stored as."""
    if a is None or b is None:
        return a is b
    if isinstance(a, float) or isinstance(b, float):
        return bool(np.float32(a) == np.float32(b))
    return a == b


def default_changes(op: str, a: int, b: int) -> tuple[tuple[str, object, object], ...]:
    """(attribute, default at a, default at b) for attributes of both whose default differs."""
    da, db = opsets.attribute_defaults(op, a), opsets.attribute_defaults(op, b)
    common = opsets.attribute_names(op, a) & opsets.attribute_names(op, b)
    return tuple((n, da.get(n), db.get(n)) for n in sorted(common)
                 if not _same_number(da.get(n), db.get(n)))


def _step(op: str, lo: int, hi: int) -> Step:
    al, ah = opsets.attribute_names(op, lo), opsets.attribute_names(op, hi)
    tl, th = opsets.allowed_types(op, lo), opsets.allowed_types(op, hi)
    dch = default_changes(op, lo, hi)
    rules = None
    if op == "PRelu" and rule_for_version(lo) is not rule_for_version(hi):
        rules = (rule_for_version(lo), rule_for_version(hi))
    up: list[Adapter] = []
    down: list[Adapter] = []
    if al - ah:
        up.append(Adapter.DROP_ATTRIBUTES)
    if ah - al:
        down.append(Adapter.DROP_ATTRIBUTES)
    if dch:
        up.append(Adapter.MATERIALIZE_DEFAULTS)
        down.append(Adapter.MATERIALIZE_DEFAULTS)
    if rules:
        up.append(Adapter.SLOPE_TO_NUMPY if rules[1] is SlopeRule.NUMPY else
                  Adapter.SLOPE_TO_LEGACY)
        down.append(Adapter.SLOPE_TO_LEGACY if rules[0] is SlopeRule.LEGACY else
                    Adapter.SLOPE_TO_NUMPY)
    if th - tl:
        down.append(Adapter.CAST_TYPES)
    if tl - th:
        up.append(Adapter.CAST_TYPES)
    return Step(op, lo, hi, frozenset(al - ah), frozenset(ah - al), dch, frozenset(tl - th),
                frozenset(th - tl), rules, tuple(up), tuple(down))


@functools.cache
def table(op: str) -> tuple[Step, ...]:
    """The steps between consecutive schema versions of ``op``, ascending."""
    vs = opsets.versions(op)
    return tuple(_step(op, a, b) for a, b in zip(vs, vs[1:]))


TABLES: dict[str, tuple[Step, ...]] = {op: table(op) for op in opsets.ACTIVATIONS}

_ORDER = list(Adapter)


@functools.cache
def plan(op: str, source: int, target: int) -> tuple[Adapter, ...]:
    """The adapters a conversion of ``op`` from schema version ``source`` to ``target``
    needs, in application order (slope before casts, so the casts wrap the final node)."""
    if source == target:
        return ()
    lo, hi = sorted((source, target))
    needed: set[Adapter] = set()
    for s in table(op):
        if lo <= s.lower and s.upper <= hi:
            needed.update(s.up if target > source else s.down)
    return tuple(a for a in _ORDER if a in needed)


def format_table(op: str) -> str:
    """The table of ``op`` as text (used by docs and ``-v``)."""
    lines = [f"{op}: versions {', '.join(map(str, opsets.versions(op)))}"]
    for s in table(op):
        lines.append(f"  {s.lower} <-> {s.upper}: {'; '.join(s.changes()) or 'no change'}")
        lines.append(f"      up: {', '.join(a.name for a in s.up) or '-'}; "
                     f"down: {', '.join(a.name for a in s.down) or '-'}")
    return "\n".join(lines)
