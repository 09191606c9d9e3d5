"""The schema-driven rule: is a node unaffected by one version step, judged from onnx.defs?

:func:`generic_step` checks one step for one node (and writes defaults whose value changes);
:func:`fast_walk`/:func:`fast_ok` decide once per (op, from, to) what makes a whole walk a
plain relabel, so most nodes of a large model are accepted with a few field reads.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from .. import opsets
from .other_ops_facts import ModelFacts, Uniform
from .other_ops_step import Refuse, Step


@functools.cache
def versions_between(op: str, v_from: int, v_to: int) -> tuple[tuple[int, int], ...]:
    """Steps (lo, hi) between neighbouring schema versions, in walking order."""
    vs = opsets.versions(op)
    lo, hi = min(v_from, v_to), max(v_from, v_to)
    chain = [v for v in vs if lo <= v <= hi]
    steps = tuple(zip(chain, chain[1:]))
    return steps if v_from < v_to else tuple(reversed(steps))


@functools.cache
def _formals(op: str, version: int) -> tuple[tuple, tuple]:
    """(inputs, outputs): per formal parameter (name, option, allowed type strings)."""
    s = opsets.schema(op, version)
    params = {tc.type_param_str: frozenset(tc.allowed_type_strs) for tc in s.type_constraints}

    def conv(ps):
        return tuple((p.name, p.option, params.get(p.type_str, frozenset([p.type_str])))
                     for p in ps)

    return conv(s.inputs), conv(s.outputs)


_SINGLE = onnx.defs.OpSchema.FormalParameterOption.Single
_OPTIONAL = onnx.defs.OpSchema.FormalParameterOption.Optional
_VARIADIC = onnx.defs.OpSchema.FormalParameterOption.Variadic


def _formal_at(formals: tuple, i: int):
    if i < len(formals):
        return formals[i]
    if formals and formals[-1][1] == _VARIADIC:
        return formals[-1]
    return None


def _attr_py(a: onnx.AttributeProto):
    return helper.get_attribute_value(a)


def _same_value(a, b) -> bool:
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        try:
            return float(np.float32(a)) == float(np.float32(b))
        except (TypeError, ValueError):
            return False
    return a == b


#: Attributes that were hints with no effect on the computed values.
_DROPPABLE = frozenset({"consumed_inputs"})


def generic_step(st: Step) -> None:
    """Accept the node at ``st.dst`` when the two schemas say it is unaffected."""
    dst_s = opsets.schema(st.op, st.dst)
    if dst_s is None or dst_s.since_version != st.dst:
        raise Refuse(f"no schema {st.op}-{st.dst}")
    if dst_s.deprecated:
        raise Refuse(f"{st.op}-{st.dst} is deprecated")
    dst_attrs = dst_s.attributes
    src_defaults = opsets.attribute_defaults(st.op, st.src)
    dst_defaults = opsets.attribute_defaults(st.op, st.dst)

    # Attributes the node sets.
    for a in list(st.w.attribute):
        spec = dst_attrs.get(a.name)
        if spec is None:
            if a.name in _DROPPABLE:
                st.del_attr(a.name)
                st.note(f"dropped {a.name} (a memory hint without effect on values)")
                continue
            # Absent at the destination: fine only when set to the value meaning "absent".
            meaning = src_defaults.get(a.name)
            if meaning is not None and _same_value(_attr_py(a), meaning):
                st.del_attr(a.name)
                st.note(f"dropped {a.name}={_attr_py(a)!r} (its default, absent at "
                        f"{st.op}-{st.dst})")
                continue
            raise Refuse(f"attribute {a.name}={_attr_py(a)!r} does not exist at "
                         f"{st.op}-{st.dst}")
        if spec.type != a.type:
            raise Refuse(f"attribute {a.name} changes type at {st.op}-{st.dst}")

    # Attributes the node leaves at their defaults.
    set_names = {a.name for a in st.w.attribute}
    for name, spec in dst_attrs.items():
        if name in set_names:
            continue
        sd, dd = src_defaults.get(name), dst_defaults.get(name)
        if sd is not None:
            if dd is None or not _same_value(sd, dd):
                st.set_attr(name, sd, attr_type=spec.type)
                st.note(f"wrote {name}={sd!r} explicitly (the default changes to {dd!r})")
        elif dd is not None and name in opsets.attribute_names(st.op, st.src):
            raise Refuse(f"attribute {name} unset at {st.op}-{st.src} has no default there "
                         f"but defaults to {dd!r} at {st.op}-{st.dst}")
        elif spec.required:
            raise Refuse(f"attribute {name} is required at {st.op}-{st.dst}")

    # Inputs and outputs: counts, positions, element types.
    src_in, src_out = _formals(st.op, st.src)
    dst_in, dst_out = _formals(st.op, st.dst)
    for kind, names, src_f, dst_f, lo_n, hi_n in (
            ("input", list(st.w.input), src_in, dst_in, dst_s.min_input, dst_s.max_input),
            ("output", list(st.w.output), src_out, dst_out, dst_s.min_output,
             dst_s.max_output)):
        while names and not names[-1]:
            names.pop()
        if not lo_n <= len(names) <= hi_n:
            raise Refuse(f"{len(names)} {kind}s, {st.op}-{st.dst} takes {lo_n}..{hi_n}")
        for i, f in enumerate(dst_f):
            if f[1] == _SINGLE and (i >= len(names) or not names[i]) and i < lo_n:
                raise Refuse(f"{kind} {i} ({f[0]}) is required at {st.op}-{st.dst}")
        for i, v in enumerate(names):
            if not v:
                continue
            df = _formal_at(dst_f, i)
            if df is None:
                raise Refuse(f"{kind} {i} does not exist at {st.op}-{st.dst}")
            sf = _formal_at(src_f, i)
            if sf is not None and sf[2] <= df[2]:
                continue
            t = st.elem_type(v)
            if t is None:
                raise Refuse(f"the element type of {kind} {i} ({v!r}) is unknown and "
                             f"{st.op}-{st.dst} allows fewer types")
            ts = f"tensor({opsets.tensor_type_name(t)})"
            if ts not in df[2]:
                raise Refuse(f"{kind} {i} ({v!r}) is {ts}, not allowed at {st.op}-{st.dst}")


@dataclass(frozen=True)
class _FastWalk:
    """What makes a whole walk a plain relabel for a node, decided once per (op, from, to).

    Only built for walks with no listed step and no default that changes. A node passes when
    it sets only attributes that exist with one type and one default all along the walk, has
    input/output counts every version accepts, and (where some version allows fewer types
    than the source) element types every version allows. Anything else takes the step-by-step
    path, which also words the refusal.
    """

    safe_attrs: frozenset[str]
    check_attrs: bool  # some attribute valid at the source is not safe
    check_counts: bool  # some count or required input differs from the source's
    n_in: tuple[int, int]
    n_out: tuple[int, int]
    required_in: tuple[int, ...]
    narrow_in: tuple[tuple[int, frozenset[str]], ...]  # (position, allowed); -1 = variadic tail
    narrow_out: tuple[tuple[int, frozenset[str]], ...]


@functools.cache
def fast_walk(op: str, v_from: int, v_to: int, table_keys: frozenset) -> _FastWalk | None:
    steps = versions_between(op, v_from, v_to)
    if any((op, hi) in table_keys for _, hi in steps):
        return None
    walk = [v_from] + [hi if v_from < v_to else lo for lo, hi in steps]
    schemas = [opsets.schema(op, v) for v in walk]
    if any(s is None or s.deprecated for s in schemas[1:]):
        return None
    first = schemas[0].attributes
    safe = set(first)
    for s in schemas[1:]:
        safe &= set(s.attributes)
    for name in list(safe):
        types = {s.attributes[name].type for s in schemas}
        defaults = {repr(opsets.attribute_defaults(op, v).get(name)) for v in walk}
        if len(types) > 1 or len(defaults) > 1:
            safe.discard(name)
    # Attributes not safe must not be needed when unset either.
    for s in schemas[1:]:
        for name, spec in s.attributes.items():
            if name in safe:
                continue
            if spec.required or name in first:
                return None  # a default to write or a required attribute: slow path
    n_in = (max(s.min_input for s in schemas[1:]), min(s.max_input for s in schemas[1:]))
    n_out = (max(s.min_output for s in schemas[1:]), min(s.max_output for s in schemas[1:]))
    required = sorted({i for s in schemas[1:] for i, p in enumerate(s.inputs)
                       if p.option == _SINGLE})

    def narrow(pick):
        src = pick(_formals(op, v_from))
        out = []
        n = max(len(pick(_formals(op, v))) for v in walk)
        for i in range(n):
            sf = _formal_at(src, i)
            if sf is None:
                continue
            allowed = sf[2]
            for v in walk[1:]:
                f = _formal_at(pick(_formals(op, v)), i)
                if f is None:
                    return None
                allowed = allowed & f[2]
            if allowed != sf[2]:
                variadic_tail = i == n - 1 and sf[1] == _VARIADIC
                out.append((-1 if variadic_tail else i, frozenset(allowed)))
        return tuple(out)

    narrow_in = narrow(lambda f: f[0])
    narrow_out = narrow(lambda f: f[1])
    if narrow_in is None or narrow_out is None:
        return None
    # An output typed by the same parameter as a checked input, in every version, has that
    # input's type: no need to look it up.
    always = min(s.min_input for s in schemas)  # inputs every valid node has
    checked_in = {i for i, _ in narrow_in if 0 <= i < always}

    def same_param(k: int) -> bool:
        for s in schemas:
            if k >= len(s.outputs):
                return False
            if not any(j < len(s.inputs) and s.inputs[j].type_str == s.outputs[k].type_str
                       for j in checked_in):
                return False
        return True

    narrow_out = tuple((k, a) for k, a in narrow_out if k < 0 or not same_param(k))
    s0 = schemas[0]
    src_required = tuple(i for i, p in enumerate(s0.inputs) if p.option == _SINGLE)
    check_counts = (n_in != (s0.min_input, s0.max_input)
                    or n_out != (s0.min_output, s0.max_output)
                    or tuple(required) != src_required)
    return _FastWalk(frozenset(safe), not set(first) <= safe, check_counts, n_in, n_out,
                     tuple(required), narrow_in, narrow_out)


@functools.cache
def _type_string(elem: int) -> str:
    return f"tensor({opsets.tensor_type_name(elem)})"


@functools.cache
def _uniform_ok(fw: _FastWalk, elem: int) -> bool:
    ts = _type_string(elem)
    return all(ts in allowed for _, allowed in fw.narrow_in + fw.narrow_out)


def _present(names) -> int:
    n = len(names)
    while n and not names[n - 1]:
        n -= 1
    return n


def fast_ok(fw: _FastWalk, n: onnx.NodeProto, facts: ModelFacts) -> bool:
    if fw.check_attrs:
        attrs = n.attribute
        if attrs:
            safe = fw.safe_attrs
            for a in attrs:
                if a.name not in safe:
                    return False
    if not (fw.check_counts or fw.narrow_in or fw.narrow_out):
        return True
    types = facts.scope_types()
    if not fw.check_counts and type(types) is Uniform:
        return _uniform_ok(fw, types.elem)
    ins = n.input
    nin = len(ins)
    if nin and not ins[-1]:
        nin = _present(ins)
    outs = n.output
    nout = len(outs)
    if nout and not outs[-1]:
        nout = _present(outs)
    if fw.check_counts:
        if not (fw.n_in[0] <= nin <= fw.n_in[1] and fw.n_out[0] <= nout <= fw.n_out[1]):
            return False
        for i in fw.required_in:
            if i < nin and not ins[i]:
                return False
    for names, narrow, count in ((ins, fw.narrow_in, nin), (outs, fw.narrow_out, nout)):
        for i, allowed in narrow:
            positions = range(i, i + 1) if i >= 0 else range(len(narrow) - 1, count)
            for j in positions:
                if j >= count:
                    continue
                v = names[j]
                if not v:
                    continue
                t = types.get(v) or facts.elem_type(v)
                if t is None or _type_string(t) not in allowed:
                    return False
    return True
