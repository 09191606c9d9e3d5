"""What one graph declares about its values, read on demand.

A shape-inferred model holds a value_info entry for every intermediate value, and IR-3 models
list every weight as a graph input as well: reading every entry to answer for a few values
(the X of each PRelu) would cost more than the rest of a command's check. :class:`Declared`
indexes the names once (a list of names is read in one pass) and reads an entry's type only
when that value is asked for.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator

import onnx

Shape = tuple[int | str | None, ...]


def _positions(names: list[str]) -> dict[str, int]:
    """name -> the position of its last entry."""
    return dict(zip(names, range(len(names))))


class Listed:
    """The names of one graph's entries, one per entry in list order, handed on by a reader
    that read them all (the structural check) so that :class:`Declared` need not read them
    again. Each list is indexed once, when first asked for, and then dropped: every
    :class:`Declared` made with it (of that graph, or of an unedited copy) shares the
    index, and none may change it."""

    def __init__(self, inputs: list[str], outputs: list[str], value_infos: list[str],
                 initializers: list[str]):
        self._lists = {"inputs": inputs, "outputs": outputs, "value_infos": value_infos,
                       "initializers": initializers}
        self._positions: dict[str, dict[str, int]] = {}

    def positions(self, which: str) -> dict[str, int]:
        """Name -> the position of its last entry in list ``which`` (``inputs``,
        ``outputs``, ``value_infos`` or ``initializers``)."""
        found = self._positions.get(which)
        if found is None:
            found = self._positions[which] = _positions(self._lists.pop(which))
        return found


class Declared:
    """The element types and shapes graph ``g`` declares in its initializers and in its
    entries (the last of its graph input, graph output and value_info entries for a name).
    ``listed``: the names of ``g``'s entries as they are now, when already read (else they
    are read here, when first needed). An edit that moves or removes entries is noticed at
    the next lookup, which indexes the names again, read from the graph (entries added
    later are not seen)."""

    def __init__(self, g: onnx.GraphProto, listed: Listed | None = None):
        self.graph = g
        self._listed = listed
        self._inits: dict[str, int] | None = None
        self._infos: list[tuple[object, dict[str, int]]] | None = None
        #: serialized TypeProto -> (its shape, whether every dim is a known int)
        self._shapes: dict[bytes, tuple[Shape | None, bool]] = {}

    def initializer_positions(self) -> dict[str, int]:
        """Initializer name -> the position of the last initializer of that name, as
        indexed (a reader must not change it)."""
        if self._inits is None:
            listed = self._listed
            self._inits = (_positions([t.name for t in self.graph.initializer])
                           if listed is None else listed.positions("initializers"))
        return self._inits

    def initializer(self, name: str) -> onnx.TensorProto | None:
        """The initializer ``name`` of this graph, or None."""
        i = self.initializer_positions().get(name)
        if i is None:
            return None
        inits = self.graph.initializer
        if i < len(inits) and inits[i].name == name:
            return inits[i]
        self._edited()
        return self.initializer(name)

    def _edited(self) -> None:
        """The graph was edited since it was indexed: index it again, from the graph."""
        self._inits = self._infos = self._listed = None

    def _index(self) -> list[tuple[object, dict[str, int]]]:
        """(entries, name -> position) for value_info, graph outputs, graph inputs."""
        if self._infos is None:
            g, listed = self.graph, self._listed
            # the last list wins: value_info over outputs over inputs
            self._infos = [(infos, _positions([vi.name for vi in infos]) if listed is None
                            else listed.positions(which))
                           for infos, which in ((g.value_info, "value_infos"),
                                                (g.output, "outputs"), (g.input, "inputs"))]
        return self._infos

    def input_names(self) -> Collection[str]:
        """The names of the graph's inputs (as indexed)."""
        return self._index()[2][1].keys()

    def value_info(self, name: str) -> onnx.ValueInfoProto | None:
        """The entry declaring ``name`` (value_info, else graph output, else graph input)."""
        for infos, pos in self._index():
            i = pos.get(name)
            if i is not None:
                if i < len(infos) and infos[i].name == name:  # type: ignore[arg-type]
                    return infos[i]  # type: ignore[index]
                self._edited()
                return self.value_info(name)
        return None

    def entries(self, names: Collection[str]) -> Iterator[onnx.ValueInfoProto]:
        """Every graph input, graph output and value_info entry declaring one of ``names``
        (a list that holds some name twice, or was edited since indexed, is read whole)."""
        for infos, pos in self._index():
            n = len(infos)  # type: ignore[arg-type]
            found = []
            whole = len(pos) != n  # a name declared twice in one list
            for name in names if not whole else ():
                i = pos.get(name)
                if i is None:
                    continue
                vi = infos[i] if i < n else None  # type: ignore[index]
                if vi is None or vi.name != name:  # the graph was edited since indexed
                    whole = True
                    break
                found.append(vi)
            if whole:
                found = [vi for vi in infos if vi.name in names]  # type: ignore[attr-defined]
            yield from found

    def elem_type(self, name: str) -> int:
        """The declared element type of ``name`` (0: not declared or not a tensor)."""
        t = self.initializer(name)
        if t is not None:
            return t.data_type
        vi = self.value_info(name)
        if vi is None or not vi.type.HasField("tensor_type"):
            return 0
        return vi.type.tensor_type.elem_type

    def shape(self, name: str) -> Shape | None:
        """The declared shape of ``name`` (ints, symbolic names, None for unknown dims): its
        entry's, else its initializer's dims; None when no rank is declared."""
        return self._shape(name)[0]

    def static_shape(self, name: str) -> tuple[int, ...] | None:
        """:meth:`shape` when every dim is a known int, else None."""
        shape, static = self._shape(name)
        return shape if static else None  # type: ignore[return-value]

    def _shape(self, name: str) -> tuple[Shape | None, bool]:
        vi = self.value_info(name)
        if vi is not None:
            data = vi.type.SerializeToString()  # a few distinct types, each read once
            known = self._shapes.get(data)
            if known is None:
                shape = _shape(vi.type)
                known = self._shapes[data] = (
                    shape, shape is not None and all(type(d) is int for d in shape))
            if known[0] is not None:
                return known
        t = self.initializer(name)
        return (None, False) if t is None else (tuple(t.dims), True)


def dims(shape: onnx.TensorShapeProto) -> Shape:
    """A declared shape as opshift reads it: each dim its value, its name, or None (unknown).
    A negative value is unknown, as runtimes read it (paddle2onnx, among others, writes -1
    for a dynamic dim; ONNX dims are >= 0, and ``opshift fix`` clears such a value)."""
    return tuple(d.dim_value if d.HasField("dim_value") and d.dim_value >= 0
                 else (d.dim_param or None) for d in shape.dim)


def dims_text(shape: onnx.TensorShapeProto) -> str:
    """A declared shape as written: ``[-1, 3, N, ?]``."""
    return "[" + ", ".join(str(d.dim_value) if d.HasField("dim_value") else d.dim_param or "?"
                           for d in shape.dim) + "]"


def tensor_shapes(tp: onnx.TypeProto) -> list[onnx.TensorShapeProto]:
    """The shapes type ``tp`` declares (its own message): a tensor's, dense or sparse, or
    that of the tensor in a sequence, an optional or a map's values."""
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        t = getattr(tp, kind)
        return [t.shape] if t.HasField("shape") else []
    if kind in ("sequence_type", "optional_type"):
        return tensor_shapes(getattr(tp, kind).elem_type)
    return tensor_shapes(tp.map_type.value_type) if kind == "map_type" else []


def negative_dim(tp: onnx.TypeProto) -> int | None:
    """The first negative dim type ``tp`` declares, or None (see :func:`dims`)."""
    return next((d.dim_value for s in tensor_shapes(tp) for d in s.dim if d.dim_value < 0),
                None)


def _shape(tp: onnx.TypeProto) -> Shape | None:
    if not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
        return None
    return dims(tp.tensor_type.shape)
