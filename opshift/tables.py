"""Text for people: tables that fit the screen, counts with the right plural, and numbers in
the fewest digits that mean exactly the stored value."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Columns a table may use; wider cells wrap inside their column.
WIDTH = 100
_GAP = "  "
_NUMPY_FLOATS = (np.float16, np.float32, np.float64, np.longdouble)


def table(head: Sequence[str], rows: Sequence[Sequence[str]], *, width: int = WIDTH,
          right: Sequence[int] = (), keep: Sequence[int] = ()) -> list[str]:
    """Lines of an aligned table no wider than ``width``: the widest columns are narrowed
    (to no less than 8 characters or their heading) and their cells wrap onto more lines.
    Columns whose index is in ``right`` are right-aligned (numbers); those in ``keep`` are
    never narrowed (names)."""
    n = len(head)
    cells = [list(head), *([str(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(n)]
    floor = [widths[i] if i in keep else max(8, len(h)) for i, h in enumerate(head)]
    while sum(widths) + len(_GAP) * (n - 1) > width:
        i = max(range(n), key=lambda k: widths[k] - floor[k])
        if widths[i] <= floor[i]:
            break  # nothing left to narrow: the table stays wider
        widths[i] -= 1
    lines = []
    for r in cells:
        parts = [textwrap.wrap(c, w, break_on_hyphens=False) or [""] if len(c) > w else [c]
                 for c, w in zip(r, widths)]
        for k in range(max(map(len, parts))):
            row = [(p[k] if k < len(p) else "") for p in parts]
            lines.append(_GAP.join(c.rjust(w) if i in right else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    return lines


def wrap(line: str, *, width: int = WIDTH, indent: str = "    ") -> list[str]:
    """``line`` in lines of at most ``width``; the continuation lines are indented."""
    lead = line[:len(line) - len(line.lstrip())]
    return textwrap.wrap(line, width, initial_indent="", subsequent_indent=lead + indent,
                         break_on_hyphens=False, drop_whitespace=True) or [line] \
        if len(line) > width else [line]


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 node``, ``2 nodes``, ``12,345 nodes`` (``many``: the plural when not word+'s')."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def attribute_value(value: Any) -> str:
    """An attribute value as messages show it: a float (attributes hold float32) or a list
    of them as the shortest decimal that reads back as the stored value (``0.2``, not
    ``0.20000000298023224``), anything else as ``repr`` shows it."""
    if isinstance(value, float) or (isinstance(value, (list, tuple)) and value
                                    and all(isinstance(v, float) for v in value)):
        return number(value)
    return repr(value)


def number(value: Any, dtype: Any = np.float32) -> str:
    """The shortest decimal that reads back as ``value`` in ``dtype``: ``0.01`` for the
    float32 nearest 0.01 (not 0.00999999978); ints, bools and strings as they are."""
    if isinstance(value, (bool, np.bool_, int, np.integer, str)):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(number(v, dtype) for v in value) + "]"
    if isinstance(value, (float, np.generic)):
        dt = np.dtype(value.dtype if isinstance(value, np.generic) else dtype)
        x = dt.type(value)
        f = float(x)
        if dt.type in _NUMPY_FLOATS:
            if f == 0 or 1e-4 <= abs(f) < 1e16 or f != f:
                return np.format_float_positional(x, unique=True, trim="0")
            return np.format_float_scientific(x, unique=True, trim="-")
        for digits in range(1, 18):  # ml_dtypes types (bfloat16): fewest digits that fit
            text = f"{f:.{digits}g}"
            if dt.type(float(text)) == x or f != f:
                return text if any(c in text for c in ".en") else text + ".0"
    return repr(value)
