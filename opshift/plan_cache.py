"""inline's emitter plans for the function and static bands, kept on disk between runs.

A plan (:class:`opshift.passes.decompose._Plan`) is what inline's hot path writes a node's
replacement from. Making one means parsing the schema's function body, binding the node's
alpha/gamma, folding CastLike below opset 15 and serializing the result: 0.3-0.5 ms per
(band, op, version, element type, attributes) in a fresh process, where loading and saving a
whole 1,000-node model takes about 5 ms. A plan depends on nothing else, so the plans a run
makes are written to a file next to the schema facts (:mod:`opshift.schema_cache`: the same
folder, the same ``OPSHIFT_CACHE_DIR``) and later processes read them back.

The file is named after the installed onnx (the function bodies) and the code that makes
plans (opshift's version, and the size and time of ``passes/decompose.py``), so an upgraded
or edited opshift never reads another's plans. Like the facts it only accelerates: a file
that cannot be read, is foreign or holds anything malformed is ignored and the plans are made
as before; a checksum covers the contents, so a damaged file is never read as another
plan. It holds at most :data:`MAX_PLANS` plans.

With each plan go the byte formats its emitter built (one per combination of name lengths,
see :func:`opshift.passes.decompose._emitter`), up to :data:`MAX_STORED_FORMATS` in all:
a later process then writes even its first nodes of those lengths by one formatting.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from . import __version__, schema_cache

#: Bumped whenever the file's layout changes.
FORMAT = 2

#: Plans kept in the file (the keys include attribute values, so a long-lived cache folder
#: could otherwise grow without bound); past it, new plans are made in memory only.
MAX_PLANS = 256

#: Emitter formats kept in the file, over all plans (~1 KB each).
MAX_STORED_FORMATS = 256

#: key -> [suffixes, nodes, consts, uses_slope, formats]: a plan's fields, then its formats
_plans: dict[tuple, tuple] | None = None
#: key -> the formats dict of the emitter made for it in this process (it adds to it)
_live: dict[tuple, dict] = {}
_dirty = False


def _code_key() -> str:
    from .passes import decompose

    st = os.stat(decompose.__file__)
    return f"{__version__}-{st.st_size}-{st.st_mtime_ns}-py{sys.version_info[0]}" \
           f"{sys.version_info[1]}"


def cache_file() -> Path | None:
    """The plan file, None when caching is off."""
    d = schema_cache.cache_dir()
    if d is None:
        return None
    return d / f"plans-{FORMAT}-{schema_cache.onnx_key()}-{_code_key()}.marshal"


def _load() -> dict[tuple, tuple]:
    global _plans
    if _plans is None:
        _plans = {}
        path = cache_file()
        if path is not None:
            try:
                got = schema_cache.unpack(path.read_bytes(), (FORMAT,))
            except OSError:
                got = None
            if isinstance(got, dict):
                _plans = got
    return _plans


def get(key: tuple) -> tuple[tuple, dict] | None:
    """(the plan fields, the formats) stored under ``key``, None when there are none or they
    are malformed."""
    entry = _load().get(key)
    if entry is None or not _well_formed(entry):
        return None
    return entry[:4], entry[4]


def put(key: tuple, fields: tuple) -> None:
    """Store a plan's fields under ``key`` (on disk at the next :func:`flush`)."""
    global _dirty
    plans = _load()
    if key in plans or len(plans) < MAX_PLANS:  # (a stored plan under key was malformed)
        plans[key] = (*fields, {})
        _dirty = True


def track(key: tuple, formats: dict) -> None:
    """``formats`` is the dict the emitter for ``key`` keeps its formats in: the ones it
    builds are stored at the next :func:`flush` (while there is room)."""
    if key in _load():
        _live[key] = formats


def flush() -> None:
    """Write the plans and formats added since the file was read (best effort, atomic)."""
    global _dirty
    plans = _load()
    new: dict[tuple, list] = {}  # key -> the formats its emitter built that are not stored
    for key, formats in _live.items():
        stored = plans[key][4]  # (tracked keys hold well-formed entries)
        built = [(k, v) for k, v in formats.items() if v is not None and k not in stored]
        if built:
            new[key] = built
    if new:
        room = MAX_STORED_FORMATS - sum(len(e[4]) for e in plans.values()
                                        if isinstance(e, tuple) and len(e) == 5
                                        and isinstance(e[4], dict))
        for key, built in new.items():
            if room <= 0:
                break
            entry = plans[key]
            plans[key] = (*entry[:4], {**entry[4], **dict(built[:room])})
            room -= len(built)
            _dirty = True
    if not _dirty:
        return
    _dirty = False
    path = cache_file()
    if path is not None:
        schema_cache.write_atomic(path, schema_cache.pack((FORMAT,), plans))


def _well_formed(entry: object) -> bool:
    """The shape of :class:`~opshift.passes.decompose._Plan`'s fields and of the formats,
    every slot in range."""
    if not (isinstance(entry, tuple) and len(entry) == 5):
        return False
    suffixes, nodes, consts, uses_slope, formats = entry
    if not (isinstance(suffixes, tuple) and suffixes and isinstance(nodes, tuple) and nodes
            and isinstance(consts, tuple) and isinstance(uses_slope, bool)
            and isinstance(formats, dict)
            and all(isinstance(s, str) for s in suffixes)
            and all(isinstance(c, bytes) for c in consts)
            and all(isinstance(k, tuple) and len(k) == 5 and isinstance(v, bytes)
                    for k, v in formats.items())):
        return False
    slots = 4 + len(suffixes) + len(consts)  # see _Plan: X, Y, S, "", names, constants
    return all(isinstance(node, tuple) and node
               and all(isinstance(i, int) and 0 <= i < slots for i in node) for node in nodes)
