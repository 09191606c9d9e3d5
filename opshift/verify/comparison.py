"""The comparison policy: when an actual array counts as the expected one.

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

The :class:`~opshift.verify.policy.Policy` in force may widen the float tolerance
(``ulp``, ``atol``, ``rtol``); NaN, infinities and the sign of zero are judged the same way.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from opshift.verify import policy as _policy

#: Allowed distance in units in the last place, per float dtype name. Other float types: 0.
ULP_TOLERANCE: dict[str, int] = {"float64": 4, "float32": 4, "float16": 2, "bfloat16": 2}

_BF16 = np.dtype(ml_dtypes.bfloat16)
#: The float dtypes compared in units in the last place (see :data:`ULP_TOLERANCE`); also
#: the float inputs :mod:`.inputs` generates special values for
FLOATS = {np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64), _BF16}


#: ml_dtypes' float8 and float4 types (their bit layouts differ from IEEE's: fnuz types have
#: no -0.0, float4 lives in the low bits of a byte)
NARROW_FLOATS = {np.dtype(getattr(ml_dtypes, n)) for n in (
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu",
    "float4_e2m1fn") if hasattr(ml_dtypes, n)}


def _is_float(dtype: np.dtype) -> bool:
    return dtype.kind == "f" or dtype == _BF16


@dataclass
class Comparison:
    """Result of comparing one expected array with one actual array."""

    ok: bool
    max_abs: float | None = None  # None when nothing was compared (dtype/shape mismatch)
    max_ulp: int | float | None = None  # float('inf') for NaN/inf mismatches
    reason: str = ""


def larger(a, b):
    """The larger of two measured maxima (max_abs, max_ulp), None being not measured."""
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
        return _compare_values(expected, actual, ulp, signed_zeros)
    if expected.dtype != actual.dtype:
        return Comparison(False, reason=f"dtype differs: expected {expected.dtype}, "
                                        f"got {actual.dtype}")
    if expected.shape != actual.shape:
        return Comparison(False, reason=f"shape differs: expected {list(expected.shape)}, "
                                        f"got {list(actual.shape)}")
    dt = expected.dtype
    if expected.size == 0:
        return Comparison(True, 0.0, 0)
    exact_kind = dt.kind in "biu" or (_is_float(dt) and dt.itemsize in (1, 2, 4, 8))
    if exact_kind and expected.tobytes() == actual.tobytes():
        # the same bits everywhere (NaN payloads and signs of zero included): what every
        # check below finds, for the price of one pass (most rewrites compute the same bits)
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
        return compare_floats(expected, actual, ulp, signed_zeros)
    if dt in NARROW_FLOATS:  # exact, as their float32 values (NaN payloads aside)
        return compare_floats(expected.astype(np.float32), actual.astype(np.float32), 0,
                              signed_zeros)
    eq = expected == actual
    bad = ~np.asarray(eq, dtype=bool)
    n = int(bad.sum())
    return _result(n, bad, expected, actual, None, None, "differ")


def _compare_values(e: Any, a: Any, ulp: int | None, signed_zeros: bool) -> Comparison:
    """Values that are not both tensors: sequences element by element (of one length), maps
    key by key (of the same keys), an empty optional (None) only with another."""
    if e is None and a is None:
        return Comparison(True, 0.0, 0)
    if isinstance(e, (list, tuple)) and isinstance(a, (list, tuple)):
        if len(e) != len(a):
            return Comparison(False, reason=f"sequence length differs: expected {len(e)}, "
                                            f"got {len(a)}")
        parts = [(f"element {i}", x, y) for i, (x, y) in enumerate(zip(e, a))]
    elif isinstance(e, dict) and isinstance(a, dict):
        if e.keys() != a.keys():
            missing = sorted(map(repr, e.keys() - a.keys()))
            extra = sorted(map(repr, a.keys() - e.keys()))
            return Comparison(False, reason="map keys differ: " + "; ".join(
                f"{what} {', '.join(keys[:3])}{' ...' if len(keys) > 3 else ''}"
                for what, keys in (("missing", missing), ("unexpected", extra)) if keys))
        parts = [(f"key {k!r}", x, a[k]) for k, x in e.items()]
    else:
        from opshift.evaluator.values import describe  # (the evaluator is not every command's)

        return Comparison(False, reason=f"expected {describe(e)}, got {describe(a)}")
    max_abs: float | None = 0.0
    max_ulp: int | float | None = 0
    bad = []
    for where, x, y in parts:
        c = compare(x, y, ulp=ulp, signed_zeros=signed_zeros)
        max_abs = None if max_abs is None or c.max_abs is None else max(max_abs, c.max_abs)
        max_ulp = None if max_ulp is None or c.max_ulp is None else max(max_ulp, c.max_ulp)
        if not c.ok:
            bad.append((where, c.reason))
    if not bad:
        return Comparison(True, max_abs, max_ulp)
    where, reason = bad[0]
    return Comparison(False, max_abs, max_ulp,
                      f"{len(bad)} of {len(parts)} differ; first, {where}: {reason}")


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


def compare_floats(e: np.ndarray, a: np.ndarray, ulp: int | None,
                  signed_zeros: bool) -> Comparison:
    """:func:`compare` of two float arrays of one dtype and shape, element by element (what
    its identical-bits shortcut stands for)."""
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

