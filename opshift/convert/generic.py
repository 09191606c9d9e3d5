"""The schema-driven step: is a node unaffected by one version step, judged from onnx.defs?

:func:`schema_step` reads the two schemas of a step once (per op and versions) into a
:class:`SchemaStep`; its :meth:`~SchemaStep.check` judges one node (writing out defaults whose
value changes and dropping ``consumed_inputs``), and :meth:`~SchemaStep.inert` says from the
model's facts that no node can need anything, so a whole op is relabelled without visiting
its nodes. Both read the same fields.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from opshift import opsets
from opshift.convert.step import Refuse, Step
from opshift.graph.element_types import TYPE_ATTRIBUTES, attribute_output_type
from opshift.graph.facts import Facts
from opshift.tables import attribute_value

_SINGLE = onnx.defs.OpSchema.FormalParameterOption.Single
_VARIADIC = onnx.defs.OpSchema.FormalParameterOption.Variadic

#: Attributes that were hints with no effect on the computed values.
DROPPABLE = frozenset({"consumed_inputs"})


@functools.cache
def versions_between(op: str, v_from: int, v_to: int) -> tuple[tuple[int, int], ...]:
    """Steps (lo, hi) between neighbouring schema versions, in walking order."""
    vs = opsets.versions(op)
    lo, hi = min(v_from, v_to), max(v_from, v_to)
    chain = [v for v in vs if lo <= v <= hi]
    steps = tuple(zip(chain, chain[1:]))
    return steps if v_from < v_to else tuple(reversed(steps))


def _formals(s: onnx.defs.OpSchema, outputs: bool) -> tuple:
    """Per formal parameter: (name, option, allowed type strings)."""
    params = {tc.type_param_str: frozenset(tc.allowed_type_strs) for tc in s.type_constraints}
    return tuple((p.name, p.option, params.get(p.type_str, frozenset([p.type_str])))
                 for p in (s.outputs if outputs else s.inputs))


def _formal_at(formals: tuple, i: int):
    if i < len(formals):
        return formals[i]
    if formals and formals[-1][1] == _VARIADIC:
        return formals[-1]
    return None


def same_value(a, b) -> bool:
    """Attribute values equal as stored (floats as float32)."""
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is b
    if isinstance(a, float) or isinstance(b, float):
        try:
            return float(np.float32(a)) == float(np.float32(b))
        except (TypeError, ValueError):
            return False
    return a == b


@dataclass(frozen=True)
class SchemaStep:
    """What the schemas of ``op``-``src`` and ``op``-``dst`` say about a node's step."""

    op: str
    src: int
    dst: int
    refused: str  # '' or why no node can take the step (no schema, deprecated)
    dst_attrs: dict  # name -> AttributeProto type
    src_defaults: dict
    writes: tuple  # (name, src default, dst default, type): unset attributes to write
    unset_refusals: tuple  # (name, message): unset attributes that cannot stay unset
    counts: tuple  # ((min, max) inputs, (min, max) outputs) at dst
    formals: tuple  # (src inputs, dst inputs, src outputs, dst outputs)
    attrs_inert: bool  # every attribute valid at src means the same at dst
    counts_inert: bool  # every count and required position valid at src is valid at dst
    narrowed: frozenset  # types some position allows at src but not at dst

    def inert(self, facts: Facts) -> bool:
        """No node of the model can need a rewrite or a refusal at this step."""
        return (not self.refused and self.attrs_inert and self.counts_inert
                and not (self.narrowed and self.narrowed & facts.possible_types()))

    @functools.cached_property
    def plain(self) -> bool:
        """No node can need a refusal, a default written or its inputs, outputs and types
        checked at this step: only its attributes can matter (see :meth:`passes`)."""
        return (not self.refused and not self.writes and not self.unset_refusals
                and self.counts_inert and not self.narrowed)

    def passes(self, node: onnx.NodeProto) -> bool:
        """:meth:`check` would leave ``node`` as it is: the step is :attr:`plain` and each
        attribute of the node exists at ``dst`` with its type."""
        if not self.plain:
            return False
        get = self.dst_attrs.get
        return all(get(a.name) == a.type for a in node.attribute)

    def check(self, st: Step) -> None:
        """Accept the node at ``st.dst`` when the two schemas say it is unaffected."""
        if self.refused:
            raise Refuse(self.refused)
        op, dst = self.op, self.dst
        for a in list(st.w.attribute):
            t = self.dst_attrs.get(a.name)
            if t is None:
                if a.name in DROPPABLE:
                    st.del_attr(a.name)
                    st.note(f"dropped {a.name}", f"{op}-{dst} does not define {a.name!r} (a "
                            "legacy hint without effect on the numbers)")
                    continue
                # Absent at the destination: fine only when set to the value meaning "absent".
                meaning = self.src_defaults.get(a.name)
                value = helper.get_attribute_value(a)
                if meaning is not None and same_value(value, meaning):
                    st.del_attr(a.name)
                    st.note(f"dropped {a.name}={attribute_value(value)}",
                            f"its default, absent at {op}-{dst}")
                    continue
                raise Refuse(f"attribute {a.name}={attribute_value(value)} does not exist at "
                             f"{op}-{dst}")
            if t != a.type:
                raise Refuse(f"attribute {a.name} changes type at {op}-{dst}")
        if self.writes or self.unset_refusals:
            have = {a.name for a in st.w.attribute}
            for name, sd, dd, t in self.writes:
                if name not in have:
                    st.set_attr(name, sd, attr_type=t)
                    sd_, dd_ = attribute_value(sd), attribute_value(dd)
                    st.note(f"{name}={sd_} written explicitly", f"the default of {name} is "
                            f"{sd_} in {op}-{self.src} but {dd_} in {op}-{dst}")
            for name, message in self.unset_refusals:
                if name not in have:
                    raise Refuse(message)
        if not self.counts_inert or self.narrowed:
            self._check_values(st)

    def _check_values(self, st: Step) -> None:
        """Input/output counts, required positions and element types."""
        op, dst = self.op, self.dst
        src_in, dst_in, src_out, dst_out = self.formals
        for kind, names, src_f, dst_f, (lo_n, hi_n) in (
                ("input", list(st.w.input), src_in, dst_in, self.counts[0]),
                ("output", list(st.w.output), src_out, dst_out, self.counts[1])):
            while names and not names[-1]:
                names.pop()
            if not lo_n <= len(names) <= hi_n:
                raise Refuse(f"{len(names)} {kind}s, {op}-{dst} takes {lo_n}..{hi_n}")
            for i, f in enumerate(dst_f):
                if f[1] == _SINGLE and (i >= len(names) or not names[i]) and i < lo_n:
                    raise Refuse(f"{kind} {i} ({f[0]}) is required at {op}-{dst}")
            if st.state.finisher is not None:
                continue  # the finisher decides the element types
            for i, v in enumerate(names):
                if not v:
                    continue
                df = _formal_at(dst_f, i)
                if df is None:
                    raise Refuse(f"{kind} {i} does not exist at {op}-{dst}")
                if kind == "output" and i == 0:
                    # the type an attribute gives the output is its type, whatever the
                    # graph declares for it
                    given = attribute_output_type(st.w)
                    if given is not None and given not in df[2]:
                        name = next(a.name for a in st.w.attribute if a.name in TYPE_ATTRIBUTES)
                        raise Refuse(f"attribute {name} makes output 0 ({v!r}) {given}, not "
                                     f"allowed at {op}-{dst}")
                sf = _formal_at(src_f, i)
                if sf is not None and sf[2] <= df[2]:
                    continue
                ts = st.facts.type_str(v)
                if ts is None:
                    dropped = (sf[2] - df[2]) if sf is not None else frozenset(["?"])
                    if not dropped & st.facts.possible_types():
                        continue  # no value of the model can have a type dst drops
                    raise Refuse(f"the type of {kind} {i} ({v!r}) is unknown and "
                                 f"{op}-{dst} allows fewer types")
                if ts not in df[2]:
                    raise Refuse(f"{kind} {i} ({v!r}) is {ts}, not allowed at {op}-{dst}")


@functools.cache
def schema_step(op: str, src: int, dst: int) -> SchemaStep:
    """The :class:`SchemaStep` of ``op`` from version ``src`` to ``dst``."""
    s, d = opsets.schema(op, src), opsets.schema(op, dst)
    refused = ""
    if d is None or d.since_version != dst:
        refused = f"no schema {op}-{dst}"
    elif d.deprecated:
        refused = f"{op}-{dst} is deprecated"
    if refused or s is None:
        return SchemaStep(op, src, dst, refused or f"no schema {op}-{src}", {}, {}, (), (),
                          ((0, 0), (0, 0)), ((), (), (), ()), False, False, frozenset())
    src_defaults = opsets.attribute_defaults(op, src)
    dst_defaults = opsets.attribute_defaults(op, dst)
    src_names = set(s.attributes)
    dst_attrs = {name: spec.type.value for name, spec in d.attributes.items()}
    writes, unset = [], []
    for name, spec in sorted(d.attributes.items()):
        sd, dd = src_defaults.get(name), dst_defaults.get(name)
        if sd is not None:
            if dd is None or not same_value(sd, dd):
                writes.append((name, sd, dd, spec.type))
        elif dd is not None and name in src_names:
            unset.append((name, f"attribute {name} unset at {op}-{src} has no default there "
                                f"but defaults to {attribute_value(dd)} at {op}-{dst}"))
        elif spec.required:
            unset.append((name, f"attribute {name} is required at {op}-{dst}"))
    attrs_inert = not writes and not unset and all(
        name in dst_attrs and dst_attrs[name] == spec.type.value
        and same_value(src_defaults.get(name), dst_defaults.get(name))
        for name, spec in s.attributes.items())
    formals = (_formals(s, False), _formals(d, False), _formals(s, True), _formals(d, True))

    def required(schema, formal) -> set[int]:
        return {i for i, f in enumerate(formal) if f[1] == _SINGLE and i < schema.min_input}

    counts_inert = (d.min_input <= s.min_input and s.max_input <= d.max_input
                    and d.min_output <= s.min_output and s.max_output <= d.max_output
                    and required(d, formals[1]) <= required(s, formals[0])
                    and {i for i, f in enumerate(formals[3]) if f[1] == _SINGLE
                         and i < d.min_output} <= {i for i, f in enumerate(formals[2])
                                                  if f[1] == _SINGLE and i < s.min_output})
    narrowed: set[str] = set()
    for src_f, dst_f in ((formals[0], formals[1]), (formals[2], formals[3])):
        for i in range(max(len(src_f), len(dst_f)) + 1):
            sf, df = _formal_at(src_f, i), _formal_at(dst_f, i)
            if sf is not None:
                narrowed |= sf[2] - (df[2] if df is not None else frozenset())
    return SchemaStep(op, src, dst, "", dst_attrs, src_defaults, tuple(writes), tuple(unset),
                      ((d.min_input, d.max_input), (d.min_output, d.max_output)), formals,
                      attrs_inert, counts_inert, frozenset(narrowed))
