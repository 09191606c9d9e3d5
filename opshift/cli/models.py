"""Reading and writing one model for a command: a file or ``-`` (stdin / stdout), the
``--input-shape`` overrides, and the IR-3 repair every shape-dependent command needs."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import onnx

from opshift.errors import ModelLoadError, OpshiftError
from opshift.graph import declared as declared_shapes

STDIO = "-"


@dataclass
class Opened:
    """A model as a command opened it."""

    model: onnx.ModelProto
    source_dir: Path | None  # where its external data lives (None: it has none)
    origin: str  # the path as given, or '<stdin>'
    size: int  # bytes read
    #: graph input -> its declared type, for the inputs --input-shape overrode
    declared: dict[str, onnx.TypeProto] = field(default_factory=dict)
    #: changes made while opening (the IR-3 repair), as change dicts
    repairs: list[dict[str, Any]] = field(default_factory=list)
    #: the structural check's walk of ``model`` (an :class:`opshift.graph.index.ModelIndex`),
    #: read through :meth:`facts`
    index: Any = None

    def facts(self, **kw):
        """A :class:`~opshift.graph.facts.Facts` of ``model`` that reads the check's
        :attr:`index` (valid while the model is as the check saw it); ``kw``: Facts' own."""
        from opshift.graph.facts import Facts

        return Facts(self.model, index=self.index, **kw)

    @property
    def folder(self) -> Path | None:
        """The model file's folder (None for stdin), where tensor data it names is read;
        unlike ``source_dir`` also when the index saw none (it does not look into
        attributes of wrong types, which fix converts)."""
        return None if self.origin == "<stdin>" else Path(self.origin).resolve().parent


def origin_of(path: str) -> str:
    return "<stdin>" if path == STDIO else path


def open_model(path: str, *, allow=(), index=None, shapes: dict[str, list[int]] | None = None,
               repair: bool = False, load_external_data: bool = False) -> Opened:
    """Read, check and prepare the model at ``path`` (``-``: stdin), filling ``index`` (a
    :class:`opshift.graph.index.ModelIndex`, made here when None; kept in :attr:`Opened.index`).

    ``shapes`` (from --input-shape) are written into the graph inputs; :func:`restore_inputs`
    puts the declared ones back before writing. With ``repair``, a model of IR < 4 whose
    initializers are not listed as graph inputs gets the IR version ``opshift fix`` would give
    it (shape inference ignores such initializers at IR 3), reported in ``repairs``.
    """
    from opshift.check import structure
    from opshift.check.opening import open_checked
    from opshift.io import models as modelio

    index = structure.ModelIndex(full=False) if index is None else index
    if path == STDIO:
        data = sys.stdin.buffer.read()
        if not data:
            raise ModelLoadError("<stdin>: empty input (0 bytes), not an ONNX model")
        model = modelio.parse_model_bytes(data, "<stdin>")
        structure.check(model, "<stdin>", allow=allow, index=index)
        if index.external or modelio.has_external_data(model):
            raise ModelLoadError("<stdin>: the model keeps tensors in external data, whose "
                                 "locations are relative to its file; give the file's path")
        opened = Opened(model, None, "<stdin>", len(data), index=index)
    else:
        model, source_dir = open_checked(path, allow=allow, index=index,
                                         load_external_data=load_external_data)
        opened = Opened(model, source_dir, path, _file_size(path), index=index)
    if shapes:
        opened.declared = set_input_shapes(opened.model, shapes, opened.origin)
    if repair:
        opened.repairs = repair_unlisted_initializers(opened.model, opened.origin)
    return opened


def _file_size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def set_input_shapes(model: onnx.ModelProto, shapes: dict[str, list[int]], origin: str
                     ) -> dict[str, onnx.TypeProto]:
    """Give graph inputs the shapes of ``shapes``; return their declared types. A name that
    is not a graph input, or a shape that contradicts the declared rank or a fixed dim, is an
    error."""
    inputs = {vi.name: vi for vi in model.graph.input}
    inits = {t.name for t in model.graph.initializer}
    declared: dict[str, onnx.TypeProto] = {}
    for name, dims in shapes.items():
        vi = inputs.get(name)
        if vi is None or name in inits:
            names = ", ".join(n for n in inputs if n not in inits) or "none"
            raise OpshiftError(f"{origin}: --input-shape {name}: no graph input of that name "
                               f"(inputs: {names})")
        if not vi.type.HasField("tensor_type"):
            raise OpshiftError(f"{origin}: --input-shape {name}: the input is not a tensor")
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            have, text = declared_shapes.dims(tt.shape), declared_shapes.dims_text(tt.shape)
            if len(have) != len(dims):
                raise OpshiftError(f"{origin}: --input-shape {name}: rank {len(dims)} given, "
                                   f"the model declares rank {len(have)} ({text})")
            for i, (d, v) in enumerate(zip(have, dims)):
                if isinstance(d, int) and d != v:
                    raise OpshiftError(f"{origin}: --input-shape {name}: dim {i} is {v}, the "
                                       f"model declares {d} ({text})")
        declared[name] = onnx.TypeProto()
        declared[name].CopyFrom(vi.type)
        tt.ClearField("shape")
        tt.shape.SetInParent()
        for v in dims:
            tt.shape.dim.add().dim_value = v
    return declared


def fixed_dims(model: onnx.ModelProto, declared: dict[str, onnx.TypeProto]) -> dict[str, str]:
    """Input name -> ``x [N, 3] as [1, 3]`` for each input whose declared shape --input-shape
    gave a size where it has a symbolic or unknown dim: what the rewrite knew that the model
    does not say."""
    out = {}
    for vi in model.graph.input:
        tp = declared.get(vi.name)
        if tp is None:
            continue
        given = list(declared_shapes.dims(vi.type.tensor_type.shape))
        tt = tp.tensor_type
        if not tt.HasField("shape"):
            out[vi.name] = f"{vi.name} (no shape) as {given}"
        elif any(not isinstance(d, int) for d in declared_shapes.dims(tt.shape)):
            out[vi.name] = f"{vi.name} {declared_shapes.dims_text(tt.shape)} as {given}"
    return out


def restore_inputs(model: onnx.ModelProto, declared: dict[str, onnx.TypeProto]) -> None:
    """Put back the declared types of the inputs --input-shape overrode (the passes write no
    inferred shapes into the model, so nothing else depends on the given ones)."""
    for vi in model.graph.input:
        if vi.name in declared:
            vi.type.CopyFrom(declared[vi.name])


def repair_unlisted_initializers(model: onnx.ModelProto, origin: str) -> list[dict[str, Any]]:
    """IR < 4 requires initializers to be graph inputs; one that is not is invisible to
    shape inference. Give such a model the IR version ``opshift fix`` gives it, and say so."""
    if model.ir_version >= 4:
        return []
    listed = {vi.name for vi in model.graph.input}
    unlisted = [t.name for t in model.graph.initializer if t.name not in listed]
    if not unlisted:
        return []
    import opshift

    old = model.ir_version
    try:
        fixed = opshift.fix(model)
    except OpshiftError as e:
        raise OpshiftError(f"{origin}: IR {old} model whose initializers are not graph inputs, "
                           f"and 'opshift fix' cannot repair it: {e}") from e
    if fixed.ir_version == old:
        raise OpshiftError(f"{origin}: IR {old} model whose initializers are not graph inputs "
                           f"({unlisted[0]!r}, ...); run 'opshift fix' on it first")
    model.ir_version = fixed.ir_version
    return [{"node": "", "op": "", "scope": "model", "kind": "ir_version",
             "what": f"IR version {old} -> {fixed.ir_version} (as 'opshift fix' does)",
             "why": f"IR {old} requires initializers to be graph inputs and "
                    f"{len(unlisted)} are not ({unlisted[0]!r}, ...), so shape inference "
                    "could not see them"}]


def with_external_data(src: Opened, *models: onnx.ModelProto) -> list[onnx.ModelProto]:
    """Copies of ``models`` with ``src``'s external data loaded, so that they can run
    whatever the working directory (the models themselves when there is none)."""
    if src.source_dir is None:
        return list(models)
    from opshift.io.tensors import load_external_data_safely

    out = []
    for m in models:  # copies: the result is saved afterwards, its data left where it is
        c = onnx.ModelProto()
        c.CopyFrom(m)
        load_external_data_safely(c, src.source_dir, src.origin)
        out.append(c)
    return out


def same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name one file (``-`` never does)."""
    if STDIO in (a, b):
        return False
    try:
        return Path(a).resolve() == Path(b).resolve() or (
            Path(b).exists() and os.path.samefile(a, b))
    except OSError:
        return False


def write_model(model: onnx.ModelProto, output: str, source_dir: Path | None, *,
                make_parents: bool = False, force: bool = False) -> int:
    """Write ``model`` to ``output`` (``-``: stdout); return the bytes written. External
    data is placed beside a file; stdout cannot hold it."""
    from opshift.io import models as modelio

    if output == STDIO:
        if source_dir is not None:
            raise OpshiftError("-o -: the model keeps tensors in external data, which cannot "
                               "go to stdout beside it; write to a file instead")
        size = modelio.write_serialized(model, sys.stdout.buffer.write, "<stdout>")
        sys.stdout.buffer.flush()
        return size
    if make_parents:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
    modelio.save(model, output, source_dir=source_dir, force=force)
    return _file_size(output)
