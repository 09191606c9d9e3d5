"""Checking that two models compute the same thing, with the bundled evaluator as the oracle.

* :func:`verify` runs a reference and a candidate model on the same inputs and compares every
  output (matched by position; a different name, count, dtype or shape is a failure).
* :func:`make_inputs` generates inputs from a graph's declared types and shapes: random normal
  values with special values mixed in (see :func:`special_values`).
* :func:`compare` is the comparison policy (see :data:`ULP_TOLERANCE`).
* :func:`region_model` and :func:`verify_rewrites` let a pass check each rewrite locally: a
  small model around the nodes before the rewrite and one around the nodes after it.
* :func:`evaluator_supports` says whether the evaluator can run a model at all.

Comparison policy
-----------------
* Integers and bool: exact.
* Floats: at most ``ULP_TOLERANCE[dtype]`` units in the last place apart (float64 4, float32 4,
  float16 2, bfloat16 2; other float types exact). The ULP distance counts the representable
  values between the two numbers, across zero (the smallest subnormal and its negative are 2
  apart). NaN equals NaN (any sign or payload); NaN never equals a number. An infinity must be
  matched by the same infinity, never by a finite number however large.
  The tolerance leaves room for a different but equivalent order of float operations in a
  rewrite (e.g. ``s*x`` vs ``x*s`` is exact, ``g*(a*e - a)`` vs ``g*a*(e - 1)`` is not); a
  wrong constant or formula shows up as far more than 4 ulp.
* Signed zeros: ``-0.0`` and ``+0.0`` are **different** (``signed_zeros=True``, the default):
  the sign of zero is observable (``1/x``, ``atan2``, ``copysign``) and ONNX's definitions of
  PRelu/LeakyRelu/Selu fix it, so a rewrite that flips it is not exact. Pass
  ``signed_zeros=False`` to treat them as equal.

Generated inputs
----------------
Symbolic or unknown dims take the size given in ``dims`` (by ``dim_param`` name), else
:data:`DEFAULT_DIM` (2). Values are reproducible for a seed, and each input's values depend
only on the seed and the input's name. A tensor of n >= 2 elements gets up to n // 2 special
values at random positions; when a tensor is too small to hold every special value at once,
:func:`verify` and :func:`verify_rewrites` run extra rounds until every special value has been
fed to every input (bounded so that the extra rounds stay small).
"""

from __future__ import annotations

import contextlib
import json
import math
import warnings
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import helper

from . import progress
from . import verify_policy as _policy
from .errors import EvaluationError, LimitError, OpshiftError, UnsupportedError, VerificationError
from .modelio import ModelLike, to_proto
from .opsets import ir_version_for_opset, normalize_domain

__all__ = [
    "DEFAULT_DIM", "ULP_TOLERANCE", "Comparison", "Row", "VerifyReport", "compare",
    "evaluator_supports", "make_inputs", "region_model", "special_values", "verify",
    "verify_rewrites",
]

#: Size used for a symbolic or unknown dim that ``dims`` does not name.
DEFAULT_DIM = 2

#: Allowed distance in units in the last place, per float dtype name. Other float types: 0.
ULP_TOLERANCE: dict[str, int] = {"float64": 4, "float32": 4, "float16": 2, "bfloat16": 2}

#: Extra rounds of generated inputs stop once this many elements have been generated in total.
_ROUND_BUDGET = 1 << 20
#: The most input elements generated for one run (1 GiB of float64).
MAX_GENERATED_ELEMENTS = 1 << 27
_MAX_ROUNDS = 32

_BF16 = np.dtype(ml_dtypes.bfloat16)
_FLOATS = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64), _BF16}


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype == _BF16


# ---------------------------------------------------------------------------------------------
# comparison
# ---------------------------------------------------------------------------------------------
@dataclass
class Comparison:
    """Result of comparing one expected array with one actual array."""

    ok: bool
    max_abs: float | None = None  # None when nothing was compared (dtype/shape mismatch)
    max_ulp: int | float | None = None  # float('inf') for NaN/inf mismatches
    reason: str = ""

    def combine(self, other: Comparison) -> Comparison:
        """Worst of two comparisons of the same output (e.g. two rounds of inputs)."""
        return Comparison(self.ok and other.ok, _max(self.max_abs, other.max_abs),
                          _max(self.max_ulp, other.max_ulp), self.reason or other.reason)


def _max(a, b):
    if a is None:
        return b
    if b is None:
        return a
    return max(a, b)


def _fmt(v: Any) -> str:
    return repr(v.item()) if isinstance(v, np.generic) else repr(v)


def _ulp_distance(e: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Number of representable values between e and a (finite, same dtype), as uint64."""
    nbits = e.dtype.itemsize * 8
    ui = np.dtype(f"uint{nbits}")
    be = e.view(ui).astype(np.uint64)
    ba = a.view(ui).astype(np.uint64)
    mask = np.uint64((1 << (nbits - 1)) - 1)
    me, ma = be & mask, ba & mask
    same_sign = (be >> np.uint64(nbits - 1)) == (ba >> np.uint64(nbits - 1))
    # Sign-magnitude: same sign -> |me - ma|, different signs -> me + ma (cannot overflow).
    return np.where(same_sign, np.where(me > ma, me - ma, ma - me), me + ma)


def compare(expected: Any, actual: Any, *, ulp: int | None = None,
            signed_zeros: bool = True) -> Comparison:
    """Compare ``actual`` with ``expected`` under the module's policy (see module docs).

    ``ulp`` overrides the tolerance of :data:`ULP_TOLERANCE` for float dtypes.
    """
    # numpy scalars (np.float32(1.0), np.bool_) are 0-d tensors
    if isinstance(expected, np.generic):
        expected = np.asarray(expected)
    if isinstance(actual, np.generic):
        actual = np.asarray(actual)
    if not isinstance(expected, np.ndarray) or not isinstance(actual, np.ndarray):
        if expected is None and actual is None:
            return Comparison(True, 0.0, 0)
        te, ta = type(expected).__name__, type(actual).__name__
        return Comparison(False, reason=f"not both tensors ({te} vs {ta})")
    if expected.dtype != actual.dtype:
        return Comparison(False, reason=f"dtype differs: expected {expected.dtype}, "
                                        f"got {actual.dtype}")
    if expected.shape != actual.shape:
        return Comparison(False, reason=f"shape differs: expected {list(expected.shape)}, "
                                        f"got {list(actual.shape)}")
    dt = expected.dtype
    if expected.size == 0:
        return Comparison(True, 0.0, 0)
    if dt.kind == "b":
        bad = expected != actual
        n = int(bad.sum())
        return _result(n, bad, expected, actual, float(n > 0), int(n > 0), "differ")
    if dt.kind in "iu":
        bad = expected != actual
        n = int(bad.sum())
        if not n:
            return Comparison(True, 0.0, 0)
        d = np.abs(expected[bad].astype(object) - actual[bad].astype(object)).max()
        return _result(n, bad, expected, actual, float(d), int(d), "differ")
    if _is_float(dt) and dt.itemsize in (1, 2, 4, 8):
        return _compare_float(expected, actual, ulp, signed_zeros)
    eq = expected == actual
    bad = ~np.asarray(eq, dtype=bool)
    n = int(bad.sum())
    return _result(n, bad, expected, actual, None, None, "differ")


def _result(n: int, bad: np.ndarray, e: np.ndarray, a: np.ndarray, max_abs, max_ulp,
            what: str) -> Comparison:
    if not n:
        return Comparison(True, max_abs, max_ulp)
    return _failed(n, int(np.argmax(bad.reshape(-1))), e, a, max_abs, max_ulp, what)


def _failed(n: int, first: int, e: np.ndarray, a: np.ndarray, max_abs, max_ulp,
            what: str) -> Comparison:
    at = tuple(int(i) for i in np.unravel_index(first, e.shape))
    return Comparison(False, max_abs, max_ulp,
                      f"{n} of {e.size} elements {what}; first at {list(at)}: expected "
                      f"{_fmt(e[at])}, got {_fmt(a[at])}")


def _compare_float(e: np.ndarray, a: np.ndarray, ulp: int | None,
                   signed_zeros: bool) -> Comparison:
    # Only elements that are not bit-for-bit-equal in value (e != a, NaN pairs included) need
    # the expensive checks; on large, mostly equal outputs that subset is small.
    pol = _policy.current()
    if ulp is None:
        ulp = pol.ulp
    tol = ULP_TOLERANCE.get(e.dtype.name, 0) if ulp is None else int(ulp)
    ef, af = e.reshape(-1), a.reshape(-1)
    with np.errstate(all="ignore"):
        cand = np.flatnonzero(ef != af)
        ec, ac = ef[cand], af[cand]
        ne, na = np.isnan(ec), np.isnan(ac)
        nan_bad = ne != na
        inf_bad = (np.isinf(ec) | np.isinf(ac)) & ~(ne | na)  # e != a here, so a mismatch
        fin = ~(ne | na | np.isinf(ec) | np.isinf(ac))
        dist = _ulp_distance(ec[fin], ac[fin])
        ulp_bad = np.zeros(len(cand), bool)
        ulp_bad[fin] = (dist > np.uint64(tol)) & ~pol.within(ec[fin], ac[fin])
        bad_idx = cand[nan_bad | inf_bad | ulp_bad]
        zero_idx = np.empty(0, np.intp)
        if signed_zeros:
            z = np.flatnonzero(ef == 0)
            zero_idx = z[np.signbit(ef[z]) != np.signbit(af[z])]
            if len(zero_idx):  # a mask, not np.union1d: that imports numpy.ma (~50 ms)
                both = np.zeros(ef.size, bool)
                both[bad_idx] = both[zero_idx] = True
                bad_idx = np.flatnonzero(both)
        max_abs = 0.0
        max_ulp: int | float = 0
        if fin.any():
            max_abs = float(np.abs(ec[fin].astype(np.float64) - ac[fin].astype(np.float64)).max())
            max_ulp = int(dist.max())
        if nan_bad.any() or inf_bad.any():
            max_abs, max_ulp = math.inf, math.inf
    if not len(bad_idx):
        return Comparison(True, max_abs, max_ulp)
    kinds = []
    if nan_bad.any():
        kinds.append("NaN vs number")
    if inf_bad.any():
        kinds.append("infinity mismatch")
    if ulp_bad.any():
        kinds.append(f"more than {tol} ulp apart" + (
            f" and more than {pol.atol:g} + {pol.rtol:g}*|expected|"
            if pol.atol or pol.rtol else ""))
    if len(zero_idx):
        kinds.append("-0.0 vs +0.0")
    return _failed(len(bad_idx), int(bad_idx.min()), e, a, max_abs, max_ulp,
                   f"differ ({', '.join(kinds)})")


# ---------------------------------------------------------------------------------------------
# report
# ---------------------------------------------------------------------------------------------
@dataclass
class Row:
    """One compared output. ``label`` names the rewrite (empty for whole-model checks)."""

    output: str
    dtype: str
    shape: list[int] | None
    max_abs: float | None
    max_ulp: int | float | None
    ok: bool
    reason: str = ""
    label: str = ""

    @property
    def name(self) -> str:
        return f"{self.label}: {self.output}" if self.label else self.output

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "output": self.output, "dtype": self.dtype,
                "shape": self.shape, "max_abs": _json_num(self.max_abs),
                "max_ulp": _json_num(self.max_ulp), "ok": self.ok, "reason": self.reason}


def _json_num(v):
    """JSON has no inf/NaN: non-finite numbers become strings ("inf", "nan")."""
    if v is None:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


@dataclass
class VerifyReport:
    """Per-output comparison rows; ``ok`` when every row passed."""

    rows: list[Row] = field(default_factory=list)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> dtype/shape/source
    seed: int | None = None
    rounds: int = 1
    signed_zeros: bool = True  # whether -0.0 vs +0.0 counted as a difference
    #: the tolerances and backend in force when it was made (:mod:`opshift.verify_policy`)
    policy: _policy.Policy = field(default_factory=_policy.current)
    #: ``Op-version`` -> where the evaluator's kernel came from ("opshift", "function body",
    #: "onnx.reference")
    kernels: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if not r.ok]

    def merge(self, other: VerifyReport) -> VerifyReport:
        """Append ``other``'s rows (and input descriptions) to this report; return self."""
        self.rows.extend(other.rows)
        for k, v in other.inputs.items():
            self.inputs.setdefault(k, v)
        self.rounds = max(self.rounds, other.rounds)
        self.kernels.update(other.kernels)
        return self

    def summary(self) -> str:
        """One line: how many outputs matched, or the first failure."""
        n = len(self.rows)
        if self.ok:
            return f"ok: {n} output{'s match' if n != 1 else ' matches'}"
        f = self.failures
        return f"FAIL: {len(f)} of {n} outputs differ; {f[0].name}: {f[0].reason}"

    def raise_if_failed(self, context: str = "") -> None:
        """Raise :class:`VerificationError` (exit 1) naming the first failing output."""
        if not self.ok:
            f = self.failures[0]
            pre = f"{context}: " if context else ""
            raise VerificationError(f"{pre}verification failed: {f.name}: {f.reason}")

    def table(self) -> str:
        """Aligned text table, then one line per failure with its reason."""
        labels = any(r.label for r in self.rows)
        head = (["rewrite"] if labels else []) + ["output", "dtype", "shape", "max abs err",
                                                  "max ulp", "result"]
        body = []
        for r in self.rows:
            # in a table that mixes rewrites with a whole-model check, say which row is which
            cells = ([r.label or "whole model"] if labels else []) + [
                r.output, r.dtype, "?" if r.shape is None else str(r.shape),
                "-" if r.max_abs is None else f"{r.max_abs:.4g}",
                "-" if r.max_ulp is None else str(r.max_ulp), "pass" if r.ok else "FAIL"]
            body.append(cells)
        widths = [max(len(c[i]) for c in [head, *body]) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
                 for cells in [head, *body]]
        lines.extend(f"FAIL {r.name}: {r.reason}" for r in self.failures)
        bodies = sorted(k for k, v in self.kernels.items() if v == "function body")
        if bodies:
            lines.append(f"run through their function body: {', '.join(bodies)}")
        borrowed = sorted(k for k, v in self.kernels.items() if v == "onnx.reference")
        if borrowed:
            lines.append(f"kernels from onnx.reference: {', '.join(borrowed)} (the others: "
                         "opshift's)")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "seed": self.seed, "rounds": self.rounds,
                "backend": self.policy.backend,
                "tolerance": self.policy.to_dict(ULP_TOLERANCE),
                "tolerance_ulp": self.policy.to_dict(ULP_TOLERANCE)["ulp"],
                "signed_zeros_differ": self.signed_zeros,
                "inputs": self.inputs, "kernels": dict(sorted(self.kernels.items())),
                "rows": [r.to_dict() for r in self.rows]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)


# ---------------------------------------------------------------------------------------------
# inputs
# ---------------------------------------------------------------------------------------------
def special_values(dtype: Any) -> np.ndarray:
    """The special values mixed into generated inputs of ``dtype``.

    Floats: +0, -0, +inf, -inf, NaN, +-smallest subnormal, +-largest subnormal, +-tiny
    (smallest normal), max, min (lowest), +-1. Signed ints: 0, 1, -1, min, min + 1, max,
    max - 1. Unsigned ints: 0, 1, max, max - 1. Bool: False, True.
    """
    dt = np.dtype(dtype)
    if dt.kind == "b":
        return np.array([False, True])
    if dt.kind in "iu":
        info = np.iinfo(dt)
        vals = [0, 1, int(info.max), int(info.max) - 1]
        if dt.kind == "i":
            vals += [-1, int(info.min), int(info.min) + 1]
        return np.array(vals, dtype=dt)
    if dt in _FLOATS:
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

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def per_round(self) -> int:
        """Special values placed per round."""
        return self.size // 2 if self.size >= 2 else 1

    def rounds_needed(self) -> int:
        if self.size == 0:
            return 1
        k = len(special_values(self.dtype))
        if self.size == 1:
            return k + 1  # round 0 is a plain random value
        return -(-k // self.per_round)


def _input_specs(graph: onnx.GraphProto, dims: Mapping[str, int] | None) -> list[_InputSpec]:
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
        if not vi.type.HasField("tensor_type"):
            kind = vi.type.WhichOneof("value") or "unknown"
            raise UnsupportedError(f"graph input {vi.name!r}: cannot generate values of "
                                   f"{kind} type; pass inputs explicitly")
        tt = vi.type.tensor_type
        if not tt.elem_type:
            raise UnsupportedError(f"graph input {vi.name!r} declares no element type; pass "
                                   "inputs explicitly")
        try:
            dt = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except (KeyError, TypeError, ValueError):
            dt = None
        name = onnx.TensorProto.DataType.Name(tt.elem_type).lower()
        if dt is None or not (dt in _FLOATS or dt.kind in "biu"):
            raise UnsupportedError(f"graph input {vi.name!r}: cannot generate values of type "
                                   f"{name}; pass inputs explicitly")
        if not tt.HasField("shape"):
            raise UnsupportedError(f"graph input {vi.name!r} declares no shape (rank "
                                   "unknown); pass inputs explicitly")
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(int(d.dim_value))
            elif d.HasField("dim_param") and d.dim_param in dims:
                shape.append(int(dims[d.dim_param]))
            else:
                shape.append(DEFAULT_DIM)
        specs.append(_InputSpec(vi.name, dt, tuple(shape)))
    return specs


def _generate(spec: _InputSpec, seed: int, part: int) -> np.ndarray:
    key = [seed, zlib.crc32(spec.name.encode())]
    # The order of the special values is fixed per (seed, name), so the rounds walk through
    # all of them; values and positions change from round to round.
    order = np.random.default_rng(key).permutation(len(special_values(spec.dtype)))
    rng = np.random.default_rng(key + [part] if part else key)
    dt, n = spec.dtype, spec.size
    if dt.kind == "b":
        flat = rng.random(n) < 0.5
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
    specials = special_values(dt)[order]
    if n >= 2:
        k = min(spec.per_round, len(specials))
        start = part * spec.per_round
        take = (start + np.arange(k)) % len(specials)
        flat[rng.choice(n, size=k, replace=False)] = specials[take]
    elif n == 1 and part > 0:
        flat[0] = specials[(part - 1) % len(specials)]
    return flat.reshape(spec.shape)


def make_inputs(graph: onnx.GraphProto, *, dims: Mapping[str, int] | None = None,
                seed: int = 0) -> dict[str, np.ndarray]:
    """Inputs for every non-initializer input of ``graph``, from its declared types and shapes.

    Symbolic/unknown dims take ``dims[dim_param]`` or :data:`DEFAULT_DIM`. Values: random
    normal (floats), half small and half full-range (ints), random (bool), with up to n // 2
    of :func:`special_values` at random positions. Deterministic for a seed. Raises
    :class:`UnsupportedError` for inputs whose type or rank is unknown or not generatable.
    """
    _check_seed(seed)
    return _generate_round(_input_specs(graph, dims), seed, 0)


def _generate_round(specs: Sequence[_InputSpec], seed: int, round_: int
                    ) -> dict[str, np.ndarray]:
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


def _check_seed(seed: int) -> None:
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool) or seed < 0:
        raise OpshiftError(f"seed {seed!r}: must be a non-negative integer")


def _rounds(specs: Sequence[_InputSpec]) -> int:
    need = max((s.rounds_needed() for s in specs), default=1)
    per = max(1, sum(s.size for s in specs))
    budget = max(1, _ROUND_BUDGET // per)
    return max(1, min(need, budget, _MAX_ROUNDS))


def _describe(inputs: Mapping[str, np.ndarray], source: str) -> dict[str, dict[str, Any]]:
    return {k: {"dtype": str(v.dtype), "shape": list(v.shape), "source": source}
            for k, v in inputs.items()}


# ---------------------------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------------------------
def _run(proto: onnx.ModelProto, feeds: Mapping[str, np.ndarray], who: str
         ) -> list[Any]:
    from .evaluator import evaluate

    try:
        if _policy.current().backend == "onnxruntime":
            return _policy.run_onnxruntime(proto, feeds)
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore", RuntimeWarning)
            out = evaluate(proto, feeds)
    except OpshiftError as e:
        e.args = (f"{who}: {e}",) + tuple(e.args[1:])
        raise
    except RecursionError as e:
        raise EvaluationError(f"{who}: evaluator failed: graph nesting too deep") from e
    except Exception as e:  # an evaluator bug must still be one line naming the model
        first = str(e).splitlines()[0] if str(e) else ""
        raise EvaluationError(f"{who}: evaluator failed: {type(e).__name__}: {first}") from e
    return [out[vi.name] for vi in proto.graph.output]


def _declared(graph: onnx.GraphProto) -> set[str]:
    return {vi.name for vi in graph.input}


def _feeds(graph: onnx.GraphProto, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    names = _declared(graph)
    return {k: v for k, v in inputs.items() if k in names}


def _compare_outputs(ref: onnx.ModelProto, cand: onnx.ModelProto, exp: list[Any],
                     act: list[Any], label: str, signed_zeros: bool) -> list[Row]:
    rows = []
    ro, co = list(ref.graph.output), list(cand.graph.output)
    for i in range(max(len(ro), len(co))):
        if i >= len(co):
            v = exp[i]
            rows.append(_row(ro[i].name, v, None, False, f"output {i} ({ro[i].name!r}) is "
                             "missing from the candidate", label))
            continue
        if i >= len(ro):
            v = act[i]
            rows.append(_row(co[i].name, v, None, False, f"candidate has an extra output {i} "
                             f"({co[i].name!r})", label))
            continue
        c = compare(exp[i], act[i], signed_zeros=signed_zeros)
        reason = c.reason
        ok = c.ok
        if ro[i].name != co[i].name:
            ok = False
            reason = (f"output {i} is named {ro[i].name!r} in the reference and "
                      f"{co[i].name!r} in the candidate" + (f"; {reason}" if reason else ""))
        rows.append(_row(ro[i].name, exp[i], c, ok, reason, label))
    return rows


def _row(name: str, v: Any, c: Comparison | None, ok: bool, reason: str, label: str) -> Row:
    if isinstance(v, np.generic):
        v = np.asarray(v)
    if isinstance(v, np.ndarray):
        dtype, shape = str(v.dtype), [int(d) for d in v.shape]
    else:
        dtype, shape = type(v).__name__, None
    return Row(name, dtype, shape, c.max_abs if c else None, c.max_ulp if c else None, ok,
               reason, label)


def _merge_rows(acc: list[Row] | None, new: list[Row]) -> list[Row]:
    if acc is None:
        return new
    out = []
    for a, b in zip(acc, new):
        out.append(Row(a.output, a.dtype, a.shape, _max(a.max_abs, b.max_abs),
                       _max(a.max_ulp, b.max_ulp), a.ok and b.ok, a.reason or b.reason,
                       a.label))
    return out


def _load(model: ModelLike, role: str) -> tuple[onnx.ModelProto, str]:
    proto, kind, _ = to_proto(model, load_external_data=True)
    who = f"{role} {model}" if kind == "path" else role
    return proto, who


def _pair_rows(ref: onnx.ModelProto, cand: onnx.ModelProto, rwho: str, cwho: str,
               inputs: Mapping[str, np.ndarray] | None, dims, seed: int, label: str,
               signed_zeros: bool, report: VerifyReport) -> list[Row]:
    if inputs is not None:
        rounds = [dict(inputs)]
        report.inputs.update(_describe(inputs, "given"))
    else:
        _check_seed(seed)
        specs = _input_specs(ref.graph, dims)
        ref_names = {s.name for s in specs}
        extra = [s for s in _input_specs(cand.graph, dims) if s.name not in ref_names]
        if extra:
            raise EvaluationError(f"{cwho}: input {extra[0].name!r} is not an input of "
                                  f"{rwho}, so the two cannot be fed the same inputs")
        n = _rounds(specs)
        report.rounds = max(report.rounds, n)
        rounds = [_generate_round(specs, seed, p) for p in range(n)]
        report.inputs.update(_describe(rounds[0], "generated"))
    from .evaluator.kernels import kernels

    for m in (ref, cand):
        report.kernels.update(kernels(m).sources)
    rows: list[Row] | None = None
    # a whole-model check (no label) can take minutes: count its runs on the progress line
    with progress.stage("whole model", 2 * len(rounds), "runs") if not label else \
            contextlib.nullcontext():
        for feeds in rounds:
            exp = _run(ref, _feeds(ref.graph, feeds), rwho)
            progress.advance()
            act = _run(cand, _feeds(cand.graph, feeds), cwho)
            progress.advance()
            rows = _merge_rows(rows, _compare_outputs(ref, cand, exp, act, label,
                                                      signed_zeros))
    return rows or []


def verify(reference: ModelLike, candidate: ModelLike,
           inputs: Mapping[str, np.ndarray] | None = None, *,
           dims: Mapping[str, int] | None = None, seed: int = 0,
           signed_zeros: bool = True) -> VerifyReport:
    """Run both models through the evaluator on the same inputs and compare every output.

    ``inputs`` (name -> array) are fed to each model that declares them; a name neither
    declares is an error. Without ``inputs``, inputs are generated from the reference graph
    with :func:`make_inputs` (``dims``, ``seed``), in as many rounds as it takes to feed every
    special value (bounded). Outputs are matched by position. Evaluator failures raise an
    :class:`OpshiftError` naming the model and node (exit 2); mismatches are report rows.
    """
    ref, rwho = _load(reference, "reference")
    cand, cwho = _load(candidate, "candidate")
    report = VerifyReport(seed=None if inputs is not None else seed, signed_zeros=signed_zeros)
    if inputs is not None:
        inputs = _check_given(inputs, ref, cand, rwho, cwho)
    report.rows = _pair_rows(ref, cand, rwho, cwho, inputs, dims, seed, "", signed_zeros,
                             report)
    return report


def _check_given(inputs: Mapping[str, np.ndarray], ref: onnx.ModelProto,
                 cand: onnx.ModelProto, rwho: str, cwho: str) -> dict[str, np.ndarray]:
    from .evaluator import check_inputs

    names = _declared(ref.graph) | _declared(cand.graph)
    for k in inputs:
        if k not in names:
            raise EvaluationError(f"input {k!r} is not an input of either model (inputs: "
                                  f"{', '.join(sorted(names)) or 'none'})")
    out = {k: np.asarray(v) for k, v in inputs.items()}
    for proto, who in ((ref, rwho), (cand, cwho)):
        try:
            check_inputs(proto.graph, _feeds(proto.graph, out))
        except OpshiftError as e:
            raise type(e)(f"{who}: {e}") from None
    return out


# ---------------------------------------------------------------------------------------------
# local verification of rewrites
# ---------------------------------------------------------------------------------------------
def region_model(nodes: Iterable[onnx.NodeProto], inputs: Sequence[onnx.ValueInfoProto],
                 outputs: Sequence[onnx.ValueInfoProto],
                 initializers: Iterable[onnx.TensorProto] = (),
                 opset_imports: Iterable[onnx.OperatorSetIdProto] | Mapping[str, int] = (),
                 functions: Iterable[onnx.FunctionProto] = ()) -> onnx.ModelProto:
    """A small model around ``nodes`` (copied), e.g. the nodes of one rewrite.

    ``opset_imports`` are OperatorSetIdProtos or a ``{domain: version}`` mapping and must
    include the default domain; the IR version is the one that opset was released with.
    Domains of ``functions`` that are not imported get version 1.
    """
    if isinstance(opset_imports, Mapping):
        imports = {normalize_domain(d): int(v) for d, v in opset_imports.items()}
    else:
        imports = {normalize_domain(i.domain): int(i.version) for i in opset_imports}
    if "" not in imports:
        raise OpshiftError("region_model: opset_imports must include the default domain")
    functions = list(functions)
    for f in functions:
        imports.setdefault(normalize_domain(f.domain), 1)
    graph = helper.make_graph([_copy(n) for n in nodes], "region", [_copy(v) for v in inputs],
                              [_copy(v) for v in outputs],
                              initializer=[_copy(t) for t in initializers])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in
                                                    imports.items()],
                              functions=[_copy(f) for f in functions],
                              producer_name="opshift.verify")
    model.ir_version = max(ir_version_for_opset(imports[""]),
                           3 if not functions else 8)  # local functions need IR 8
    return model


def _copy(msg):
    out = type(msg)()
    out.CopyFrom(msg)
    return out


def verify_rewrites(rewrites: Iterable[tuple[str, onnx.ModelProto, onnx.ModelProto]], *,
                    seed: int = 0, dims: Mapping[str, int] | None = None,
                    signed_zeros: bool = True) -> VerifyReport:
    """Check each ``(label, before, after)`` region pair on the same generated inputs.

    One row per output per rewrite, with the label in the row. A region the evaluator cannot
    run raises :class:`UnsupportedError` naming the label (nothing can be verified there).
    """
    report = VerifyReport(seed=seed, signed_zeros=signed_zeros)
    for label, before, after in rewrites:
        before, _ = _load(before, "before")
        after, _ = _load(after, "after")
        for m, role in ((before, "before"), (after, "after")):
            why = evaluator_supports(m)
            if why is not None:
                raise UnsupportedError(f"cannot verify rewrite {label}: {role}: {why}")
        part = VerifyReport(seed=seed)
        part.rows = _pair_rows(before, after, f"before {label}", f"after {label}", None, dims,
                               seed, label, signed_zeros, part)
        report.rows.extend(part.rows)
        report.rounds = max(report.rounds, part.rounds)
        report.kernels.update(part.kernels)
        progress.advance()
        for k, v in part.inputs.items():
            report.inputs.setdefault(f"{label}: {k}", v)
    return report


def evaluator_supports(model: ModelLike) -> str | None:
    """None if the evaluator has a kernel (opshift's own or onnx.reference's) for every node of
    ``model`` (graph, subgraphs, functions) at its version; else a reason naming the first
    node that has none. Under the onnxruntime backend (:mod:`opshift.verify_policy`) always
    None: onnxruntime says at run time."""
    if _policy.current().backend == "onnxruntime":
        return None
    from .evaluator.kernels import kernels

    proto, _, _ = to_proto(model)
    return kernels(proto).missing
