"""The version steps whose meaning changed in ways the ``onnx.defs`` schemas do not show.

``@at(v, *ops)`` registers a function for the step between ``v`` and each op's previous
schema version; it runs in both directions (``st.up`` tells which) before the schema-driven
check (:mod:`opshift.convert.generic`), and either rewrites the node so that it computes
exactly the same at the step's destination or raises :class:`~.step.Refuse`. ``when``
(optional) says from the model's facts alone whether the function can act on any node of
the model; when it cannot, nodes of that op are not even visited for it.

``@replaces(op)`` registers an exact replacement for an op that does not exist at the target
opset. The functions live in :mod:`opshift.convert.steps`, one module per concern.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opshift.convert.step import Step
    from opshift.graph.facts import Facts

StepFunction = Callable[["Step"], None]
#: (op, lo, hi, up, facts) -> whether the step function can act on some node of the model
When = Callable[[str, int, int, bool, "Facts"], bool]


@dataclass(frozen=True)
class Registered:
    fn: StepFunction
    when: When | None = None
    #: it replaces every node going up (by another op): the schema step never sees one
    replaces_up: bool = False

    def may_act(self, op: str, lo: int, hi: int, up: bool, facts: Facts) -> bool:
        return self.when is None or self.when(op, lo, hi, up, facts)


#: (op, version) -> the functions of the step into ``version``, in registration order
STEPS: dict[tuple[str, int], list[Registered]] = {}
#: op -> a function replacing a node of an op that does not exist at the target opset
REPLACEMENTS: dict[str, StepFunction] = {}


def at(version: int, *ops: str, when: When | None = None, replaces_up: bool = False
       ) -> Callable[[StepFunction], StepFunction]:
    """Register a step function for the step into ``version`` of each of ``ops``
    (``replaces_up``: it replaces every node going up, see :class:`Registered`)."""

    def deco(fn: StepFunction) -> StepFunction:
        for op in ops:
            STEPS.setdefault((op, version), []).append(Registered(fn, when, replaces_up))
        return fn

    return deco


def replaces(op: str) -> Callable[[StepFunction], StepFunction]:
    """Register the exact replacement of ``op`` for opsets where it does not exist."""

    def deco(fn: StepFunction) -> StepFunction:
        REPLACEMENTS[op] = fn
        return fn

    return deco


def steps_for(op: str, version: int) -> list[Registered]:
    """The functions registered for the step into ``version`` of ``op`` (loads them)."""
    _load()
    return STEPS.get((op, version), [])


def replacement_for(op: str) -> StepFunction | None:
    _load()
    return REPLACEMENTS.get(op)


_loaded = False


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        from opshift.convert import steps  # noqa: F401  (registers every step module)
