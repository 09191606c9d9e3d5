"""ai.onnx.ml ops onnx.reference has no kernel for, or one that cannot run them: ZipMap,
CategoryMapper, CastMap (maps as :mod:`opshift.evaluator.values` holds them), LabelEncoder-1.

LabelEncoder-1 maps strings to their index in ``classes_strings`` (``default_int64`` when
absent; the first index of a string listed twice) and int64 values to the string at that
index (``default_string`` outside the list). Version 2 replaced it by key/value lists, which
is all onnx.reference's kernel takes.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from opshift.evaluator.registry import op


@op("LabelEncoder", 1, domain="ai.onnx.ml")
def label_encoder_1(ctx, x):
    classes = list(ctx.attrs.get("classes_strings", []))
    flat = x.reshape(-1)
    if x.dtype.kind in "OUS":
        index: dict[str, int] = {}
        for i, name in enumerate(classes):
            index.setdefault(name, i)
        default = ctx.attrs.get("default_int64", -1)
        out = np.array([index.get(str(v), default) for v in flat], np.int64)
    else:
        default = ctx.attrs.get("default_string", "_Unused")
        out = np.array([classes[i] if 0 <= i < len(classes) else default
                        for i in flat.astype(np.int64).tolist()], dtype=object)
    return out.reshape(x.shape)


@op("ZipMap", 1, domain="ai.onnx.ml")
def zip_map(ctx, x):
    """One map per row of X ([N, C], or [C] as one row): the C class labels (ints or strings)
    to the row's values, float32 scalars; of a label listed twice, the later column (as
    onnxruntime's map assignment keeps)."""
    ints, strs = ctx.attrs.get("classlabels_int64s"), ctx.attrs.get("classlabels_strings")
    if bool(ints) == bool(strs):
        raise ctx.error("exactly one of classlabels_int64s and classlabels_strings must be "
                        "set")
    labels = list(ints or strs)
    if x.ndim not in (1, 2):
        raise ctx.error(f"X must be 1-D or 2-D, got shape {list(x.shape)}")
    rows = x.reshape(-1, x.shape[-1])
    if rows.shape[1] != len(labels):
        raise ctx.error(f"X has {rows.shape[1]} columns for {len(labels)} class labels")
    return ([dict(zip(labels, row)) for row in rows],)


@op("CategoryMapper", 1, domain="ai.onnx.ml")
def category_mapper(ctx, x):
    """Strings to int64 (``default_int64`` for a string not listed) or int64 to strings
    (``default_string``), by the pairs of ``cats_strings`` and ``cats_int64s``; of a key
    listed twice, the later pair (as onnxruntime's map assignment keeps)."""
    strings = list(ctx.attrs.get("cats_strings", []))
    ints = list(ctx.attrs.get("cats_int64s", []))
    if len(strings) != len(ints):
        raise ctx.error(f"cats_strings has {len(strings)} entries, cats_int64s {len(ints)}")
    flat = x.reshape(-1)
    if x.dtype == object:
        to_int = dict(zip(strings, ints))
        default = ctx.attrs["default_int64"]
        return np.array([to_int.get(_text(v), default) for v in flat],
                        np.int64).reshape(x.shape)
    to_str = dict(zip(ints, strings))
    default = ctx.attrs["default_string"]
    out = np.empty(flat.size, object)
    out[:] = [to_str.get(v, default) for v in flat.tolist()]
    return out.reshape(x.shape)


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


@op("CastMap", 1, domain="ai.onnx.ml")
def cast_map(ctx, x):
    """The map's values in ascending key order as a [1, n] tensor of ``cast_to``'s type:
    DENSE gives every value, SPARSE puts the value of key k at position k of ``max_map``
    positions (keys must lie in 0 .. max_map - 1) and pads the others with 0 (strings: "0.f",
    as onnxruntime pads). Strings become numbers when the whole string is one (float32
    rounded once from the decimal, int64 in range), float32 becomes int64 toward zero and a
    string as C's ``%f`` writes it."""
    if not isinstance(x, dict) or not all(isinstance(k, int) for k in x):
        raise ctx.error("X must be a map with int64 keys")
    cast = {"TO_FLOAT": _to_float32, "TO_INT64": _to_int64, "TO_STRING": _to_string}.get(
        ctx.attrs["cast_to"])
    if cast is None:
        raise ctx.error(f"cast_to {ctx.attrs['cast_to']!r} is not TO_FLOAT, TO_INT64 or "
                        "TO_STRING")
    dtype = {_to_float32: np.float32, _to_int64: np.int64, _to_string: object}[cast]
    keys = sorted(x)
    try:
        values = [cast(x[k]) for k in keys]
    except ValueError as e:
        raise ctx.error(str(e)) from None
    form = ctx.attrs["map_form"]
    if form == "DENSE":
        out = np.empty(len(values), dtype)
        out[:] = values
        return out.reshape(1, -1)
    if form != "SPARSE":
        raise ctx.error(f"map_form {form!r} is not DENSE or SPARSE")
    size = ctx.attrs["max_map"]
    if keys and (keys[0] < 0 or keys[-1] >= size):
        raise ctx.error(f"key {keys[0] if keys[0] < 0 else keys[-1]} is outside 0 .. "
                        f"{size - 1} (max_map {size})")
    out = np.full(size, "0.f" if dtype is object else 0, dtype)
    if keys:
        out[np.array(keys, np.int64)] = np.array(values, dtype)
    return out.reshape(1, -1)


def _to_float32(v) -> np.float32:
    if not isinstance(v, str):
        return np.float32(v)
    try:
        d = float(v)
    except ValueError:
        raise ValueError(f"value {v!r} is not a number") from None
    f = np.float32(d)
    if not np.isfinite(d) or not np.isfinite(f):
        if np.isfinite(d):
            raise ValueError(f"value {v!r} is out of float32's range")
        return f
    # the float32 nearest the decimal itself (d was rounded once already: a tie in
    # float32 may not be one in the decimal)
    exact = Fraction(v.strip())
    near = [c for c in (np.nextafter(f, np.float32(-np.inf)), f,
                        np.nextafter(f, np.float32(np.inf))) if np.isfinite(c)]
    return min(near, key=lambda c: (abs(Fraction(float(c)) - exact),
                                    int(np.array(c).view(np.uint32)) & 1))


def _to_int64(v) -> int:
    if isinstance(v, str):
        try:
            i = int(v.strip())
        except ValueError:
            raise ValueError(f"value {v!r} is not an integer") from None
    else:
        if not np.isfinite(v):
            raise ValueError(f"value {v!r} has no int64 value")
        i = int(v)  # toward zero
    if not -(1 << 63) <= i < (1 << 63):
        raise ValueError(f"value {v!r} is out of int64's range")
    return i


def _to_string(v) -> str:
    if isinstance(v, str):
        return v
    if np.isnan(v):
        return "-nan" if np.signbit(v) else "nan"
    return f"{float(v):f}"
