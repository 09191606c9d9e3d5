"""Text for people: tables that fit the screen, counts with the right plural, and numbers in
the fewest digits that mean exactly the stored value."""

from __future__ import annotations

import os
import shutil
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

import numpy as np

#: Columns text uses when stdout is not a terminal and COLUMNS is unset (logs, pipes, tests
#: see the same layout everywhere).
WIDTH = 100
#: The fewest columns text is laid out for, however narrow the terminal says it is.
MIN_WIDTH = 40
_GAP = "  "
_ELLIPSIS = "..."
_NUMPY_FLOATS = (np.float16, np.float32, np.float64, np.longdouble)


def screen_width() -> int:
    """Columns for text: ``COLUMNS`` when set, else the terminal's width when stdout is one,
    else :data:`WIDTH`; never less than :data:`MIN_WIDTH`."""
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return max(MIN_WIDTH, int(env))
    try:
        tty = sys.stdout is not None and sys.stdout.isatty()
    except (AttributeError, ValueError):  # replaced or closed stdout
        tty = False
    if not tty:
        return WIDTH
    return max(MIN_WIDTH, shutil.get_terminal_size((WIDTH, 24)).columns)


def shorten(token: str, width: int) -> str:
    """``token`` in at most ``width`` characters: its start and end kept, the middle given
    as ``...`` (``/model.2/Split_output_0`` in 16: ``/model...utput_0``)."""
    if len(token) <= width:
        return token
    keep = max(width - len(_ELLIPSIS), 2)
    return token[:keep // 2] + _ELLIPSIS + token[len(token) - (keep + 1) // 2:]


def table(head: Sequence[str], rows: Sequence[Sequence[str]], *, width: int | None = None,
          right: Sequence[int] = (), keep: Sequence[int] = (),
          whole: Sequence[int] = ()) -> list[str]:
    """Lines of an aligned table no wider than ``width`` (default :func:`screen_width`).

    Too wide, the widest columns are narrowed: first down to their longest word (their cells
    wrap between words), then, if that is not enough, to no less than 8 characters or their
    heading (columns of names down to 20 first), where a word longer than the column is
    shortened in the middle (:func:`shorten`); a word is never split across lines. Columns
    whose index is in ``right`` are right-aligned (numbers); those in ``keep`` are never
    narrowed; the cells of those in ``whole`` (shapes) are one word each, never wrapped."""
    width = screen_width() if width is None else width
    n = len(head)
    cells = [list(head), *([str(c) for c in r] for r in rows)]
    widths = [max(len(r[i]) for r in cells) for i in range(n)]
    words = [widths[i] if i in whole else max(len(w) for r in cells for w in r[i].split()
                                              or [""]) for i in range(n)]
    lossless = [widths[i] if i in keep else max(words[i], len(h)) for i, h in enumerate(head)]
    least = [widths[i] if i in keep else max(8, len(h)) for i, h in enumerate(head)]
    # lossless first; then long words (names) down to 20 characters, which shortened in the
    # middle still tell names apart, before short words; then whatever is widest
    names = [max(least[i], min(lossless[i], 20)) for i in range(n)]
    for floor in (lossless, names, least):
        while sum(widths) + len(_GAP) * (n - 1) > width:
            i = max(range(n), key=lambda k: widths[k] - floor[k])
            if widths[i] <= floor[i]:
                break  # nothing left to narrow at this stage
            widths[i] -= 1
    lines = []
    for r in cells:
        parts = [[shorten(c, w)] if i in whole else _cell(c, w)
                 for i, (c, w) in enumerate(zip(r, widths))]
        for k in range(max(map(len, parts))):
            row = [(p[k] if k < len(p) else "") for p in parts]
            lines.append(_GAP.join(c.rjust(w) if i in right else c.ljust(w)
                                   for i, (c, w) in enumerate(zip(row, widths))).rstrip())
    return lines


def _cell(text: str, width: int) -> list[str]:
    """The lines of one cell: wrapped between words, a word too long shortened."""
    if len(text) <= width:
        return [text]
    return textwrap.wrap(" ".join(shorten(w, width) for w in text.split()), width,
                         break_long_words=False, break_on_hyphens=False) or [""]


def wrap(line: str, *, width: int | None = None, indent: str = "    ") -> list[str]:
    """``line`` in lines of at most ``width`` (default :func:`screen_width`); the
    continuation lines are indented. Words are never split: one longer than a line (a long
    name in a message) stands whole on its own line."""
    width = screen_width() if width is None else width
    if len(line) <= width:
        return [line]
    lead = line[:len(line) - len(line.lstrip())]
    return textwrap.wrap(line, width, initial_indent="", subsequent_indent=lead + indent,
                         break_long_words=False, break_on_hyphens=False,
                         drop_whitespace=True) or [line]


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
