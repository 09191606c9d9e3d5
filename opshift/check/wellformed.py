"""What makes a parsed protobuf a well-formed ONNX model, beyond its graph structure.

Beyond what any reader needs (:mod:`opshift.io.readable`: names that are UTF-8, known element
types, tensors whose data fit their dims, known IR version and opset imports): declared types
whose element types and dimension names are readable, a graph's header (its names, declared
types and initializers), tensors held in attributes, a node listing an output twice. Each
check here returns a one-line description of the first such problem, or None;
:mod:`opshift.check.structure` runs them during its walk and names the graph and node.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

import onnx

from opshift.graph.declared import negative_dim
from opshift.io.readable import elem_problem, not_text, tensor_problem, tensor_tail, text_problem


def type_problem(tp: onnx.TypeProto, what: str, *, undefined_ok: bool = True) -> str | None:
    """An unknown element type or a dimension name that is not text anywhere in ``tp``
    (tensor, sparse tensor, sequence, optional, map). ``undefined_ok``: element type 0 (not
    yet known) is allowed, as in value_info; a graph input must say what it takes. A
    negative dim is not a problem here (:func:`negative_dim`)."""
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        tt = getattr(tp, kind)
        p = elem_problem(tt.elem_type, what, undefined_ok=undefined_ok)
        if p is not None:
            return p
        if tt.HasField("shape"):
            for d in tt.shape.dim:
                if not isinstance(d.dim_param, str):
                    return not_text(f"{what}: dimension name", d.dim_param)
        return None
    if kind in ("sequence_type", "optional_type"):
        return type_problem(getattr(tp, kind).elem_type, what, undefined_ok=True)
    if kind == "map_type":
        p = elem_problem(tp.map_type.key_type, f"{what} (map key)", undefined_ok=False)
        return p or type_problem(tp.map_type.value_type, what, undefined_ok=True)
    return None


@dataclass
class Header:
    """What :func:`read_header` read of one graph's declarations, each read once: the
    problems found, and the names and serialized types the structural walk looks up
    afterwards."""

    problems: list[str] = field(default_factory=list)
    input_names: list[str] = field(default_factory=list)
    output_names: list[str] = field(default_factory=list)
    value_info_names: list[str] = field(default_factory=list)
    initializer_names: list[str] = field(default_factory=list)
    #: name -> its declared TypeProto, serialized (value_info over outputs over inputs)
    types: dict[str, bytes] = field(default_factory=dict)
    #: per list (inputs, outputs, value_info), its first entry declaring a negative dim
    negative_dims: list[str] = field(default_factory=list)
    #: the serialized types of the inputs, outputs and value_info entries, in entry order
    listed_types: list[list[bytes]] = field(default_factory=list)
    _positions: dict[str, int] | None = None

    def declared(self) -> Iterator[tuple[list[str], list[bytes]]]:
        """(names, serialized types) of the inputs, outputs and value_info entries, in turn."""
        return zip((self.input_names, self.output_names, self.value_info_names),
                   self.listed_types)

    def initializer(self, g: onnx.GraphProto, name: str) -> onnx.TensorProto | None:
        """The initializer ``name`` of ``g``, the graph read (the last of that name)."""
        if self._positions is None:
            names = self.initializer_names
            self._positions = dict(zip(names, range(len(names))))
        i = self._positions.get(name)
        return None if i is None else g.initializer[i]


def read_header(g: onnx.GraphProto, label: str) -> Header:
    """Names, declared types and initializers of graph ``g`` (labelled ``label``): what must
    hold before its nodes mean anything. Each distinct declared type is checked once (a
    model declares a few types for thousands of values)."""
    h = Header()
    if not isinstance(g.name, str):
        h.problems.append(not_text("graph name", g.name))
        h.input_names = [vi.name for vi in g.input]
        h.initializer_names = [t.name for t in g.initializer]
        return h
    listed, h.listed_types = [], []
    for kind, infos in (("input", g.input), ("output", g.output), ("value_info", g.value_info)):
        names = [vi.name for vi in infos]
        listed.append(names)
        bad = text_problem(names)
        if bad is not None:
            h.problems.append(f"{label}: {not_text(f'{kind} name', bad)}")
        types = [vi.type.SerializeToString() for vi in infos]
        h.listed_types.append(types)
        p, negative = _types_problem(infos, types, kind)
        if p is not None:
            h.problems.append(f"{label}: {p}")
        if negative is not None:
            h.negative_dims.append(f"{label}: {negative}")
        h.types.update(zip(names, types))
    h.input_names, h.output_names, h.value_info_names = listed
    h.initializer_names = names = [t.name for t in g.initializer]
    bad = text_problem(names)
    if bad is not None:
        h.problems.append(f"{label}: {not_text('tensor name', bad)}")
        return h
    for t in g.initializer:
        tail = tensor_tail(t)
        if tail is not None:
            h.problems.append(f"{label}: initializer {t.name!r}{tail}")
    return h


def _types_problem(infos: Sequence[onnx.ValueInfoProto], types: list[bytes], kind: str
                   ) -> tuple[str | None, str | None]:
    """(:func:`type_problem` of the first entry of ``infos`` whose type has one, what the
    first entry declaring a negative dim declares), checking each distinct type
    (``types``: each entry's, serialized) once."""
    n = len(types)
    first = dict(zip(reversed(types), range(n - 1, -1, -1)))  # the first entry wins
    negative = None
    for i in sorted(first.values()):
        vi = infos[i]
        p = type_problem(vi.type, f"{kind} {vi.name!r}", undefined_ok=kind != "input")
        if p is not None:
            return p, negative
        d = negative_dim(vi.type) if negative is None else None
        if d is not None:
            negative = f"{kind} {vi.name!r} declares dimension {d}"
    return None, negative


def attribute_tensor_problem(n: onnx.NodeProto) -> str | None:
    """The first tensor held in an attribute of ``n`` whose header and data disagree."""
    for a in n.attribute:
        ts = [a.t] if a.type == onnx.AttributeProto.TENSOR else (
            a.tensors if a.type == onnx.AttributeProto.TENSORS else ())
        for t in ts:
            p = tensor_problem(t, f"attribute {a.name!r}")
            if p is not None:
                return p
    return None


def repeated_output(outs: Sequence[str]) -> str | None:
    """A node that lists one output name twice: which producer a reader means is undecidable
    (an empty name, an absent optional output, may repeat)."""
    seen: set[str] = set()
    for name in outs:
        if name in seen:
            return f"lists output {name!r} twice"
        if name:
            seen.add(name)
    return None
