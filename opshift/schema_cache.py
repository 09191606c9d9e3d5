"""The schema facts every command's hot path needs, kept on disk between runs.

The first question asked of ``onnx.defs`` in a process builds onnx's whole schema registry:
about 15 ms, three times what loading and saving a 1,000-node model costs. The structural
check and ``inline`` need only a little of it: which version of an op is in force at an
opset, which ops can hold graphs or tensors, and for PRelu, LeakyRelu and Selu their
attribute types, defaults, number of inputs, input types and function bodies. Those facts
are read from onnx's schemas once, written to a small file (Python's marshal format) named
after the installed onnx (its version and its compiled extension's size and time, so a
different build never reads another's file) with a CRC-32 of its contents, and read back by
later processes in a few tenths of a millisecond.

The cache is only an accelerator: without a usable file (unwritable folder, corrupt or
foreign content) the facts come from ``onnx.defs`` as before. ``OPSHIFT_CACHE_DIR`` picks
the folder (default ``$XDG_CACHE_HOME/opshift`` or ``~/.cache/opshift``); set it to ``off``
to never read or write one.
"""

from __future__ import annotations

import contextlib
import functools
import marshal
import os
import tempfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import onnx

#: Bumped whenever the file's layout changes.
FORMAT = 3

#: The ops whose attributes and function bodies are kept.
DEEP_OPS = ("PRelu", "LeakyRelu", "Selu")


@dataclass(frozen=True)
class SchemaFacts:
    """Default-domain schema facts (see the module docstring)."""

    since: dict[str, tuple[int, ...]]  # op -> every since_version, ascending
    graph_ops: frozenset[str]  # some version has a graph attribute
    tensor_ops: frozenset[str]  # some version has a graph or tensor attribute
    # op -> since_version -> attribute name -> (AttributeProto type, default or None)
    attributes: dict[str, dict[int, dict[str, tuple[int, object]]]]
    bodies: dict[str, bytes]  # op -> its newest function body (serialized FunctionProto)
    # op -> since_version -> (number of inputs, the types its input 0 takes)
    inputs: dict[str, dict[int, tuple[int, tuple[str, ...]]]]

    def since_version(self, op: str, opset: int) -> int | None:
        """What ``onnx.defs.get_schema(op, opset).since_version`` gives, None if no schema."""
        best = None
        for v in self.since.get(op, ()):
            if v > opset:
                break
            best = v
        return best


@functools.cache
def onnx_key() -> str:
    """onnx's version and its compiled extension's size and time (read once: the file name,
    and the check of what a file holds, both use it)."""
    from onnx import onnx_cpp2py_export

    st = os.stat(onnx_cpp2py_export.__file__)
    return f"{onnx.__version__}-{st.st_size}-{int(st.st_mtime)}"


def cache_dir() -> Path | None:
    """The folder of the cache files, None when caching is off."""
    env = os.environ.get
    return _cache_dir(env("OPSHIFT_CACHE_DIR"), env("XDG_CACHE_HOME"), env("HOME"))


@functools.lru_cache(maxsize=8)
def _cache_dir(env: str | None, xdg: str | None, home: str | None) -> Path | None:
    # (cached per value of the variables it reads -- ``home`` only keys the cache, for
    # expanduser -- as every command asks, and pathlib's Path.home() and joins cost ~0.1 ms)
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else Path(env)
    base = xdg or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base, "opshift")


def cache_file() -> Path | None:
    d = cache_dir()
    return None if d is None else d / f"schemas-{FORMAT}-{onnx_key()}.marshal"


def build() -> SchemaFacts:
    """The facts, read from ``onnx.defs`` (builds onnx's schema registry)."""
    import onnx.defs

    since: dict[str, set[int]] = {}
    graph_ops: set[str] = set()
    tensor_ops: set[str] = set()
    attributes: dict[str, dict[int, dict[str, tuple[int, object]]]] = {}
    inputs: dict[str, dict[int, tuple[int, tuple[str, ...]]]] = {}
    graph_kinds = {onnx.defs.OpSchema.AttrType.GRAPH, onnx.defs.OpSchema.AttrType.GRAPHS}
    tensor_kinds = graph_kinds | {onnx.defs.OpSchema.AttrType.TENSOR,
                                  onnx.defs.OpSchema.AttrType.TENSORS,
                                  onnx.defs.OpSchema.AttrType.SPARSE_TENSOR}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain not in ("", "ai.onnx"):
            continue
        since.setdefault(s.name, set()).add(s.since_version)
        kinds = {a.type for a in s.attributes.values()}
        if kinds & graph_kinds:
            graph_ops.add(s.name)
        if kinds & tensor_kinds:
            tensor_ops.add(s.name)
        if s.name in DEEP_OPS:
            attrs = {}
            for name, a in s.attributes.items():
                d = a.default_value
                default = (onnx.helper.get_attribute_value(d)
                           if d is not None and d.name else None)
                attrs[name] = (int(a.type.value), default)
            attributes.setdefault(s.name, {})[s.since_version] = attrs
            x_types = next((tuple(sorted(tc.allowed_type_strs)) for tc in s.type_constraints
                            if tc.type_param_str == s.inputs[0].type_str), ())
            inputs.setdefault(s.name, {})[s.since_version] = (s.max_input, x_types)
    bodies = {}
    for op in DEEP_OPS:
        s = onnx.defs.get_schema(op)
        fvs = list(s.function_opset_versions)
        if fvs:
            bodies[op] = s.get_function_with_opset_version(max(fvs))
    return SchemaFacts({k: tuple(sorted(v)) for k, v in since.items()}, frozenset(graph_ops),
                       frozenset(tensor_ops), attributes, bodies, inputs)


def pack(head: tuple, value: object) -> bytes:
    """A cache file's bytes: ``head`` (what says the file's layout and whose it is), a CRC-32
    of ``value``'s marshal bytes, then those bytes."""
    payload = marshal.dumps(value)
    return marshal.dumps((*head, zlib.crc32(payload), payload))


def unpack(data: bytes, head: tuple) -> object | None:
    """The value :func:`pack` wrote behind ``head``; None when ``data`` is not that: another
    head, a checksum that does not match, or not marshal at all."""
    try:
        *got, crc, payload = marshal.loads(data)
        if tuple(got) != head or zlib.crc32(payload) != crc:
            return None
        return marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None


def _dump(f: SchemaFacts) -> bytes:
    return pack((FORMAT, onnx_key()),
                (f.since, f.graph_ops, f.tensor_ops, f.attributes, f.bodies, f.inputs))


def _load(data: bytes) -> SchemaFacts | None:
    """The facts in ``data``, None unless it is a file of this format and this onnx build,
    its checksum right and its fields of the right kinds."""
    fields = unpack(data, (FORMAT, onnx_key()))
    kinds = (dict, frozenset, frozenset, dict, dict, dict)
    if not (isinstance(fields, tuple) and len(fields) == len(kinds)
            and all(isinstance(v, k) for v, k in zip(fields, kinds))):
        return None
    return SchemaFacts(*fields)


#: Cache files of one kind (``schemas-*``, ``plans-*``) kept in the folder: each onnx build,
#: opshift version and Python using the folder has its own, and a write removes the oldest
#: beyond this many, so upgrades and edits do not pile files up.
KEEP_FILES = 8


def write_atomic(path: Path, data: bytes) -> None:
    """Write a cache file, best effort and atomic: a reader never sees half a file. Then
    remove the oldest files of its kind beyond :data:`KEEP_FILES`."""
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, path)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            return
        _prune(path)


def _prune(path: Path) -> None:
    kind = path.name.split("-", 1)[0] + "-"
    others = []
    with os.scandir(path.parent) as it:
        for e in it:
            if e.name.startswith(kind) and e.name != path.name and e.is_file():
                others.append((e.stat().st_mtime_ns, e.path))
    for _, old in sorted(others, reverse=True)[KEEP_FILES - 1:]:
        with contextlib.suppress(OSError):
            os.unlink(old)


@functools.cache
def facts() -> SchemaFacts:
    """The facts: from the cache file when it is there and belongs to this onnx, else from
    ``onnx.defs`` (then written for the next process)."""
    path = cache_file()
    if path is not None:
        with contextlib.suppress(OSError):
            got = _load(path.read_bytes())
            if got is not None:
                return got
    built = build()
    if path is not None:
        with contextlib.suppress(ValueError):  # a default marshal cannot write: no file
            write_atomic(path, _dump(built))
    return built
