"""How convert crosses each op's version boundaries, read from the registries.

For every default-domain op, :func:`crossings` lists each step between neighbouring schema
versions with the functions :mod:`.registry` holds for it and what :mod:`.generic`'s schema
step does in each direction, and how a node gets below the op's first version (a registered
replacement, its onnx function body, or not at all). ``opshift ops`` prints this.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from opshift import opsets
from opshift.convert.generic import schema_step
from opshift.convert.registry import Registered, replacement_for, steps_for

#: The step module whose functions only refuse (features with no exact form on one side).
REFUSALS = f"{__package__}.steps.refused"


@dataclass(frozen=True)
class StepFunction:
    """One registered function of a step."""

    name: str
    module: str  # the module under opshift.convert.steps
    doc: str  # first line of its docstring, '' without one
    when: str  # the name of its ``when`` ('' without): it runs only where that allows
    refusal: bool  # it lives in steps/refused.py: it refuses the nodes it acts on

    @classmethod
    def of(cls, r: Registered) -> StepFunction:
        doc = (r.fn.__doc__ or "").strip().splitlines()
        return cls(r.fn.__name__, r.fn.__module__.rsplit(".", 1)[-1], doc[0] if doc else "",
                   getattr(r.when, "__name__", ""), r.fn.__module__ == REFUSALS)


@dataclass(frozen=True)
class SchemaSide:
    """What the schema-driven step does in one direction (from ``src`` to ``dst``)."""

    refused: str  # '' or why every node is refused (no schema, deprecated destination)
    writes: tuple[str, ...]  # unset attributes whose default changes: written explicitly
    required: tuple[str, ...]  # unset attributes that make a node refused (new meanings)
    dropped: tuple[str, ...]  # attributes absent at dst: refused unless set to their default
    retyped: tuple[str, ...]  # attributes whose type changes: refused when set
    narrowed: tuple[str, ...]  # types allowed at src but not at dst: nodes of them refused
    counts: bool  # input/output counts or required positions are checked
    #: the registered function that replaces every node this way (the schema step never
    #: sees one), or ''
    replaced: str = ""

    @classmethod
    def of(cls, op: str, src: int, dst: int) -> SchemaSide:
        s = schema_step(op, src, dst)
        attrs = {} if s.refused else opsets.schema(op, src).attributes
        # An attribute required on both sides is on every valid node: nothing to check.
        required = tuple(name for name, _ in s.unset_refusals
                         if not (name in attrs and attrs[name].required))
        return cls(s.refused, tuple(w[0] for w in s.writes), required,
                   tuple(n for n in attrs if n not in s.dst_attrs),
                   tuple(n for n, a in attrs.items()
                         if n in s.dst_attrs and s.dst_attrs[n] != a.type.value),
                   tuple(sorted(s.narrowed)), not s.refused and not s.counts_inert)

    @property
    def refuses(self) -> bool:
        """Every node is refused this way (no registered function replaces them first)."""
        return bool(self.refused and not self.replaced)

    @property
    def relabel(self) -> bool:
        """No node needs more than its new version number."""
        return not (self.refused or self.writes or self.required or self.dropped
                    or self.retyped or self.narrowed or self.counts)

    def words(self) -> str:
        """A few words for people."""
        if self.replaced:
            return f"replaced ({self.replaced})"
        if self.refused:
            return f"refused ({self.refused})"
        if self.relabel:
            return "relabel"
        parts = [f"{verb} {', '.join(names)}" for verb, names in (
            ("writes", self.writes), ("needs", self.required), ("drops", self.dropped),
            ("retypes", self.retyped)) if names]
        if self.narrowed:
            parts.append(f"checks types ({len(self.narrowed)} fewer)")
        if self.counts:
            parts.append("checks counts")
        return ", ".join(parts)


@dataclass(frozen=True)
class Boundary:
    """The step between neighbouring schema versions ``lo`` and ``hi`` (registered at
    ``hi``): its registered functions, run both ways before the schema step's check."""

    lo: int
    hi: int
    functions: tuple[StepFunction, ...]
    up: SchemaSide
    down: SchemaSide

    @property
    def refused(self) -> bool:
        """Some nodes are refused here by a refusal step or every node by the schemas."""
        return bool(self.up.refuses or self.down.refuses
                    or any(f.refusal for f in self.functions))


@dataclass(frozen=True)
class Crossings:
    """Every version boundary of one op, and how a node gets below its first version."""

    op: str
    versions: tuple[int, ...]
    boundaries: tuple[Boundary, ...]
    #: below the first version: None (it is 1), 'function body', 'refused', or the name of
    #: the registered replacement
    below: str | None

    def to_dict(self) -> dict:
        """For ``--json``: ``below``, and per boundary ``from``, ``to``, ``refused``,
        ``functions`` and ``schema_up``/``schema_down`` (each with ``relabel``)."""
        def side(s: SchemaSide) -> dict:
            return {**asdict(s), "relabel": s.relabel}

        return {"below": self.below, "steps": [
            {"from": b.lo, "to": b.hi, "refused": b.refused,
             "functions": [asdict(f) for f in b.functions],
             "schema_up": side(b.up), "schema_down": side(b.down)} for b in self.boundaries]}


def crossings(op: str) -> Crossings:
    """The :class:`Crossings` of default-domain ``op``."""
    vs = opsets.versions(op)
    bounds = []
    for lo, hi in zip(vs, vs[1:]):
        up = SchemaSide.of(op, lo, hi)
        for r in steps_for(op, hi):
            if r.replaces_up:
                up = replace(up, replaced=r.fn.__name__)
        bounds.append(Boundary(lo, hi, tuple(StepFunction.of(r) for r in steps_for(op, hi)),
                               up, SchemaSide.of(op, hi, lo)))
    return Crossings(op, vs, tuple(bounds), _below(op, vs[0]))


def _below(op: str, first: int) -> str | None:
    if first <= 1:
        return None
    replace = replacement_for(op)
    if replace is not None:
        return replace.__name__
    return "function body" if opsets.has_function_body(op, first) else "refused"
