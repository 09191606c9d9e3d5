"""Generated inputs: random values from declared types and shapes, special values mixed in.

Symbolic or unknown dims take the size given in ``dims`` (by ``dim_param`` name), else
:data:`DEFAULT_DIM` (2). Values are reproducible for a seed, and each input's values depend
only on the seed and the input's name (in a region check, on its position among the
region's values: see :class:`RegionInputs`). A tensor of n >= 2 elements gets up to n // 2 special
values at random positions; when a tensor is too small to hold every special value at once,
:func:`opshift.verify.verify` and :func:`opshift.verify.verify_rewrites` run extra rounds until
every special value has been fed to every input (bounded so that the extra rounds stay small).
Inputs named in ``finite`` get the finite special values only (no +-inf, no NaN): a caller
that accepted a difference for non-finite values of some input (``inline
--allow-nonfinite-slope``) checks everything else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import zlib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import helper

from opshift.errors import LimitError, OpshiftError, UnsupportedError
from opshift.graph.declared import dims as declared_dims
from opshift.verify.comparison import FLOATS

#: Size used for a symbolic or unknown dim that ``dims`` does not name.
DEFAULT_DIM = 2

#: Extra rounds of generated inputs stop once this many elements have been generated in total.
_ROUND_BUDGET = 1 << 20
#: The most input elements generated for one run (1 GiB of float64).
MAX_GENERATED_ELEMENTS = 1 << 27
_MAX_ROUNDS = 32


_SPECIAL_STRINGS = ["", " ", "\t\n", "a", "A", "The Cat", "0", "-1.5e3", "ünïcödé ß 漢字",
                    "x" * 64]


def special_values(dtype: Any) -> np.ndarray:
    """The special values mixed into generated inputs of ``dtype``.

    Floats: +0, -0, +inf, -inf, NaN, +-smallest subnormal, +-largest subnormal, +-tiny
    (smallest normal), max, min (lowest), +-1. Signed ints: 0, 1, -1, min, min + 1, max,
    max - 1. Unsigned ints: 0, 1, max, max - 1. Bool: False, True. Strings: empty, blanks,
    case, digits and a number, non-ASCII letters, a long one.
    """
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind == "O":  # ONNX strings
        return np.array(_SPECIAL_STRINGS, object)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        vals = [0, 1, int(info.max), int(info.max) - 1]
        if dt.kind == "i":
            vals += [-1, int(info.min), int(info.min) + 1]
        return np.array(vals, dtype=dt)
    if dt in FLOATS:
        fi = ml_dtypes.finfo(dt)
        sub = float(fi.smallest_subnormal)
        tiny = float(fi.tiny)
        big_sub = tiny - sub  # exact in float64 for every supported dtype
        vals = [0.0, -0.0, math.inf, -math.inf, math.nan, sub, -sub, big_sub, -big_sub,
                tiny, -tiny, float(fi.max), float(fi.min), 1.0, -1.0]
        return np.array(vals, dtype=np.float64).astype(dt)
    raise UnsupportedError(f"cannot generate values of type {dt}")


@dataclass
class _InputSpec:
    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    finite: bool = False  # no +-inf, no NaN among the special values
    guessed: bool = False  # some dim is unknown: sized by a guess
    #: realistic values only (a whole-model round): finite floats, integers in ``[0, high)``
    plain: bool = False
    high: int = 2

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @cached_property
    def specials(self) -> np.ndarray:
        vals = special_values(self.dtype)
        return vals[np.isfinite(vals)] if self.finite and self.dtype in FLOATS else vals

    @property
    def per_round(self) -> int:
        """Special values placed per round."""
        return self.size // 2 if self.size >= 2 else 1

    def rounds_needed(self) -> int:
        if self.size == 0 or self.plain:
            return 1
        k = len(self.specials)
        if self.size == 1:
            return k + 1  # round 0 is a plain random value
        return -(-k // self.per_round)


#: Sizes tried, in order, for the open dims of a whole model's inputs until the reference
#: runs: a batch (axis 0), the spatial dims of an image (NCHW's H, W; NHWC's), any other
#: (a sequence, a signal's length). The first are cheap; a model whose windows, strides or
#: concatenations need larger or rounder sizes (a detector's multiples of 32, an audio
#: model's window) runs on a later one.
SIZE_PROFILES: tuple[dict[str, int], ...] = (
    {"batch": 2, "spatial": 64, "other": 16},
    {"batch": 2, "spatial": 224, "other": 128},
    {"batch": 1, "spatial": 320, "other": 512},
    {"batch": 1, "spatial": 640, "other": 2048},
)


#: ops whose input at that position is a shape: sizes a model asks for by constant
_SHAPE_INPUTS = {"Reshape": 1, "Expand": 1, "ConstantOfShape": 0}


def size_profiles(graph: onnx.GraphProto) -> list[dict[str, int]]:
    """:data:`SIZE_PROFILES`, then one per size the model's constant shapes name (a Reshape
    to ``[10, 8, 8]``, or to a Concat of ``[10]`` and computed dims, that an exporter traced
    at a sequence of 10), batch 1: the sizes a model traced at one size runs at, the most
    named first, three at most."""
    from opshift.io.tensors import tensor_array

    consts: dict[str, onnx.TensorProto] = {t.name: t for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.output:
            consts.update((n.output[0], a.t) for a in n.attribute if a.name == "value")
    shapes = {n.input[at] for n in graph.node
              if (at := _SHAPE_INPUTS.get(n.op_type)) is not None and len(n.input) > at}
    for n in reversed(graph.node):  # the parts a shape is concatenated from
        if n.op_type == "Concat" and n.output and n.output[0] in shapes:
            shapes.update(n.input)
    counts: dict[int, int] = {}
    for name in shapes:
        t = consts.get(name)
        if t is None or t.data_type != onnx.TensorProto.INT64 or len(t.dims) > 1 \
                or t.data_location == onnx.TensorProto.EXTERNAL:
            continue
        with contextlib.suppress(Exception):
            for v in tensor_array(t).tolist():
                if 2 < v <= 4096:
                    counts[v] = counts.get(v, 0) + 1
    tried = {v for p in SIZE_PROFILES for v in p.values()}
    named = sorted((v for v in counts if v not in tried), key=lambda v: (-counts[v], v))[:3]
    return [*SIZE_PROFILES, *({"batch": 1, "spatial": v, "other": v} for v in named)]


def dim_role(rank: int, axis: int, shape: Sequence[int | str | None]) -> str:
    """What an open dim most likely is, for :data:`SIZE_PROFILES`: ``batch``, ``spatial``
    or ``other``."""
    if axis == 0 and rank >= 2:
        return "batch"
    if rank >= 4 and axis >= 2:  # NCHW, NCDHW
        nhwc = rank == 4 and isinstance(shape[3], int) and shape[3] in (1, 3, 4) \
            and not isinstance(shape[1], int)
        return "other" if nhwc and axis == 3 else "spatial"
    if rank == 4 and axis == 1 and isinstance(shape[3], int) and shape[3] in (1, 3, 4):
        return "spatial"  # NHWC with C known
    return "other"


def input_specs(graph: onnx.GraphProto, dims: Mapping[str, int] | None,
                finite: Collection[str] = (), sizes: Mapping[str, int] | None = None
                ) -> list[_InputSpec]:
    """One spec per input to generate. An open dim takes ``dims[its name]``, else its
    role's size in ``sizes`` (one of :data:`SIZE_PROFILES`; a name seen twice keeps the
    size it got first), else :data:`DEFAULT_DIM`."""
    dims = dict(dims or {})
    for k, v in dims.items():
        if not isinstance(v, (int, np.integer)) or isinstance(v, bool) or v < 0:
            raise OpshiftError(f"dims[{k!r}] = {v!r}: a dim size must be a non-negative integer")
    inits = {t.name for t in graph.initializer} | {t.values.name for t in
                                                  graph.sparse_initializer}
    specs = []
    for vi in graph.input:
        if vi.name in inits:
            continue
        tp = vi.type
        if tp.HasField("optional_type") and tp.optional_type.elem_type.HasField("tensor_type"):
            tp = tp.optional_type.elem_type  # an optional tensor: generated full
        if not tp.HasField("tensor_type"):
            kind = (vi.type.WhichOneof("value") or "unknown_type").removesuffix("_type")
            raise UnsupportedError(f"graph input {vi.name!r}: cannot generate a value of "
                                   f"{kind} type; give it through the Python API "
                                   "(opshift.verify.verify(..., inputs={...}))")
        tt = tp.tensor_type
        if not tt.elem_type:
            raise UnsupportedError(f"graph input {vi.name!r} declares no element type; pass "
                                   "inputs explicitly")
        try:
            dt = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except (KeyError, TypeError, ValueError):
            dt = None
        name = onnx.TensorProto.DataType.Name(tt.elem_type).lower()
        if dt is None or not (dt in FLOATS or dt.kind in "biuO"):
            raise UnsupportedError(f"graph input {vi.name!r}: cannot generate values of type "
                                   f"{name}; pass inputs explicitly")
        if not tt.HasField("shape"):
            raise UnsupportedError(f"graph input {vi.name!r} declares no shape (rank "
                                   "unknown); pass inputs explicitly")
        shape, guessed = [], False
        declared = list(declared_dims(tt.shape))
        for axis, d in enumerate(declared):
            if isinstance(d, int):
                shape.append(d)
            elif d in dims:  # (a name)
                shape.append(int(dims[d]))
            else:
                size = DEFAULT_DIM if sizes is None else \
                    sizes[dim_role(len(declared), axis, declared)]
                if d is not None and sizes is not None:
                    dims[d] = size  # the same name: the same size everywhere
                shape.append(size)
                guessed = True
        specs.append(_InputSpec(vi.name, dt, tuple(shape), vi.name in finite, guessed))
    return specs


def _generate(spec: _InputSpec, seed: int, part: int) -> np.ndarray:
    key = [seed, zlib.crc32(spec.name.encode())]
    # The order of the special values is fixed per (seed, name), so the rounds walk through
    # all of them; values and positions change from round to round.
    specials = spec.specials
    seeds = np.random.SeedSequence(key)  # the seeding default_rng(key) does, made once
    order = np.random.Generator(np.random.PCG64(seeds)).permutation(len(specials))
    rng = np.random.default_rng(key + [part]) if part else \
        np.random.Generator(np.random.PCG64(seeds))
    dt, n = spec.dtype, spec.size
    if spec.plain:
        return _plain(spec, rng).reshape(spec.shape)
    if dt.kind == "b":
        flat = rng.random(n) < 0.5
    elif dt.kind == "O":  # strings: one to three lowercase words
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        flat = np.empty(n, object)
        flat[:] = [" ".join("".join(rng.choice(letters, rng.integers(1, 9)))
                            for _ in range(rng.integers(1, 4))) for _ in range(n)]
    elif dt.kind in "iu":
        info = np.iinfo(dt)
        full = rng.integers(int(info.min), int(info.max), size=n, dtype=dt, endpoint=True)
        small = np.clip(np.rint(rng.normal(0.0, 4.0, n)), int(info.min), min(int(info.max),
                                                                              2**53))
        flat = np.where(rng.random(n) < 0.5, small.astype(dt), full)
    elif dt == np.float64:
        flat = rng.standard_normal(n)
    else:
        flat = rng.standard_normal(n, dtype=np.float32).astype(dt, copy=False)
    specials = specials[order]
    if n >= 2:
        k = min(spec.per_round, len(specials))
        start = part * spec.per_round
        take = (start + np.arange(k)) % len(specials)
        flat[rng.choice(n, size=k, replace=False)] = specials[take]
    elif n == 1 and part > 0:
        flat[0] = specials[(part - 1) % len(specials)]
    return flat.reshape(spec.shape)


def _plain(spec: _InputSpec, rng: np.random.Generator) -> np.ndarray:
    """Values a model meets in use: standard normal floats, integers in ``[0, high)``
    (indices its tables hold, 0/1 masks), random bools, short words."""
    dt, n = spec.dtype, spec.size
    if dt.kind == "b":
        return rng.random(n) < 0.5
    if dt.kind == "O":
        letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
        flat = np.empty(n, object)
        flat[:] = ["".join(rng.choice(letters, rng.integers(1, 9))) for _ in range(n)]
        return flat
    if dt.kind in "iu":
        high = max(1, min(spec.high, int(np.iinfo(dt).max)))
        return rng.integers(0, high, size=n).astype(dt)
    if dt == np.float64:
        return rng.standard_normal(n)
    return rng.standard_normal(n, dtype=np.float32).astype(dt, copy=False)


#: ops an integer input passes through to the node that reads it as indices, unchanged in
#: value: input positions that carry the values
_PASS_THROUGH = {"Cast": (0,), "Identity": (0,), "Unsqueeze": (0,), "Squeeze": (0,),
                 "Reshape": (0,), "Flatten": (0,), "Expand": (0,), "Transpose": (0,),
                 "Tile": (0,), "Slice": (0,), "Concat": None, "Gather": (0,),
                 "CastLike": (0,)}


def index_bounds(graph: onnx.GraphProto) -> dict[str, int]:
    """For each integer graph input that reaches, through ops that pass values on unchanged
    (Cast, Unsqueeze, Reshape, ...), the indices of a Gather or GatherElements whose data
    has a known size on the axis it indexes, or the indices of a OneHot of constant depth:
    the smallest such size (values in ``[0, size)`` are valid indices there)."""
    from opshift.graph.declared import dims as declared_of
    from opshift.io.tensors import tensor_array

    sizes: dict[str, list[int | str | None]] = {}
    for vi in [*graph.input, *graph.value_info]:
        if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape"):
            sizes[vi.name] = list(declared_of(vi.type.tensor_type.shape))
    consts: dict[str, np.ndarray] = {}
    for t in graph.initializer:
        sizes[t.name] = list(t.dims)
        if t.data_type in (onnx.TensorProto.INT64, onnx.TensorProto.INT32) and len(t.dims) <= 1:
            with contextlib.suppress(Exception):
                consts[t.name] = tensor_array(t)
    readers: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in graph.node:
        if node.op_type == "Constant" and node.output:
            for a in node.attribute:
                if a.name == "value":
                    sizes[node.output[0]] = list(a.t.dims)
                    with contextlib.suppress(Exception):
                        consts[node.output[0]] = onnx.numpy_helper.to_array(a.t)
        for i, name in enumerate(node.input):
            readers.setdefault(name, []).append((node, i))
    out: dict[str, int] = {}
    for vi in graph.input:
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None or tt.elem_type not in _INTEGER_TYPES:
            continue
        bound, seen, todo = None, {vi.name}, [vi.name]
        while todo:
            for node, i in readers.get(todo.pop(), ()):
                size = _indexed_size(node, i, sizes, consts)
                if size is not None:
                    bound = size if bound is None else min(bound, size)
                    continue
                passes = _PASS_THROUGH.get(node.op_type, ())
                if node.domain in ("", "ai.onnx") and (passes is None or i in passes):
                    for o in node.output[:1]:
                        if o and o not in seen:
                            seen.add(o)
                            todo.append(o)
        if bound is not None and bound > 0:
            out[vi.name] = bound
    return out


_INTEGER_TYPES = {onnx.TensorProto.INT8, onnx.TensorProto.INT16, onnx.TensorProto.INT32,
                  onnx.TensorProto.INT64, onnx.TensorProto.UINT8, onnx.TensorProto.UINT16,
                  onnx.TensorProto.UINT32, onnx.TensorProto.UINT64}


def _indexed_size(node: onnx.NodeProto, i: int, sizes: Mapping[str, list],
                  consts: Mapping[str, np.ndarray]) -> int | None:
    """The size of the axis that input ``i`` of ``node`` indexes, when it is read as indices
    and that size is known."""
    if node.domain not in ("", "ai.onnx") or i != 1 and node.op_type != "OneHot":
        return None
    if node.op_type in ("Gather", "GatherElements") and i == 1:
        axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
        shape = sizes.get(node.input[0])
        if shape is None or not -len(shape) <= axis < len(shape):
            return None
        d = shape[axis]
        return d if isinstance(d, int) else None
    if node.op_type == "OneHot" and i == 0 and len(node.input) > 1:
        depth = consts.get(node.input[1])
        if depth is not None and depth.size == 1:
            return int(depth.reshape(-1)[0])
    return None


def plain_round(specs: Sequence[_InputSpec], seed: int, bounds: Mapping[str, int]
                ) -> dict[str, np.ndarray]:
    """One round of realistic values (see :func:`_plain`) for ``specs``; integer inputs
    named in ``bounds`` stay below their bound."""
    plain = [dataclasses.replace(s, plain=True, high=bounds.get(s.name, 2)) for s in specs]
    return generate_round(plain, seed, 0)


def make_inputs(graph: onnx.GraphProto | onnx.ModelProto, *,
                dims: Mapping[str, int] | None = None, seed: int = 0,
                finite: Collection[str] = ()) -> dict[str, np.ndarray]:
    """Inputs for every non-initializer input of ``graph`` (a model: its main graph), from
    its declared types and shapes.

    Symbolic/unknown dims take ``dims[dim_param]`` or :data:`DEFAULT_DIM`. Values: random
    normal (floats), half small and half full-range (ints), random (bool), with up to n // 2
    of :func:`special_values` at random positions (the finite ones only for the inputs named
    in ``finite``). Deterministic for a seed. Raises :class:`UnsupportedError` for inputs
    whose type or rank is unknown or not generatable.
    """
    check_seed(seed)
    if isinstance(graph, onnx.ModelProto):
        graph = graph.graph
    return generate_round(input_specs(graph, dims, finite), seed, 0)


def generate_round(specs: Sequence[_InputSpec], seed: int, round_: int
                   ) -> dict[str, np.ndarray]:
    """Round ``round_`` of the inputs ``specs`` describe, from ``seed`` (the same every run);
    a LimitError when they are over :data:`MAX_GENERATED_ELEMENTS`."""
    total = sum(s.size for s in specs)
    if total > MAX_GENERATED_ELEMENTS:
        shapes = ", ".join(f"{s.name} {list(s.shape)}" for s in specs)
        raise LimitError(f"inputs of {total} elements ({shapes}) are over the "
                         f"{MAX_GENERATED_ELEMENTS} opshift generates; give them with "
                         "--inputs, or smaller symbolic dims with --dim")
    try:
        return {s.name: _generate(s, seed, round_) for s in specs}
    except (ValueError, MemoryError) as e:  # e.g. a shape too large for numpy
        shapes = ", ".join(f"{s.name} {list(s.shape)}" for s in specs)
        raise OpshiftError(f"cannot generate inputs ({shapes}): {e}") from e


#: region inputs of at most this many elements (all rounds) are kept for reuse: past it,
#: making them costs little next to running the region on them
_REUSED_ELEMENTS = 1 << 16


class RegionInputs:
    """Generated inputs of region checks, by structure: an input is seeded by its position
    among the region's values (as :func:`~.region.region_key` numbers them), not by its
    name, so regions that differ only in value names or constants (thousands of nodes of one
    op with their own slopes) are fed the same inputs, made once."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._made: dict[tuple, tuple[list[list[np.ndarray]], list[dict[str, Any]]]] = {}

    def rounds(self, specs: Sequence[_InputSpec], positions: Mapping[str, int]
               ) -> tuple[list[dict[str, np.ndarray]], dict[str, dict[str, Any]]]:
        """Every round's inputs for ``specs`` (named as the region names them), and their
        description (see :func:`describe_inputs`)."""
        sig = tuple((positions[s.name], s.dtype, s.shape, s.finite) for s in specs)
        made = self._made.get(sig)
        if made is None:
            canon = [dataclasses.replace(s, name=f"#{p}") for s, (p, *_) in zip(specs, sig)]
            rounds = [generate_round(canon, self.seed, r) for r in range(round_count(canon))]
            made = ([list(r.values()) for r in rounds],
                    list(describe_inputs(rounds[0], "generated",
                                   {c.name for c in canon if c.finite}).values()))
            if len(made[0]) * sum(s.size for s in specs) <= _REUSED_ELEMENTS:
                for arrays in made[0]:  # fed to many regions: none may write into them
                    for a in arrays:
                        a.flags.writeable = False
                self._made[sig] = made
        names = [s.name for s in specs]
        return [dict(zip(names, r)) for r in made[0]], dict(zip(names, made[1]))


def check_seed(seed: int) -> None:
    """Refuse a seed that is not a non-negative integer (one-line OpshiftError)."""
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise OpshiftError(f"seed {seed!r}: must be a non-negative integer")


def round_count(specs: Sequence[_InputSpec]) -> int:
    """How many rounds of inputs to generate for ``specs``: as many as their special values
    need, within the element budget and the round limit."""
    need = max((s.rounds_needed() for s in specs), default=1)
    per = max(1, sum(s.size for s in specs))
    budget = max(1, _ROUND_BUDGET // per)
    return max(1, min(need, budget, _MAX_ROUNDS))


def describe_inputs(inputs: Mapping[str, Any], source: str, finite: Collection[str] = ()
                    ) -> dict[str, dict[str, Any]]:
    """name -> {dtype, shape, source} of each input, as a report lists them (``source``: where
    they came from, ", finite" added for the names in ``finite``)."""
    from opshift.evaluator.values import dtype_and_shape

    return {k: dict(zip(("dtype", "shape"), dtype_and_shape(v)),
                    source=f"{source}, finite" if k in finite else source)
            for k, v in inputs.items()}

