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
as before. It holds at most :data:`MAX_PLANS` plans.
"""

from __future__ import annotations

import marshal
import os
import sys
from pathlib import Path

from . import __version__, schema_cache

#: Bumped whenever the file's layout changes.
FORMAT = 1

#: Plans kept in the file (the keys include attribute values, so a long-lived cache folder
#: could otherwise grow without bound); past it, new plans are made in memory only.
MAX_PLANS = 512

#: key -> (suffixes, nodes, consts, uses_slope), the fields of a plan
_plans: dict[tuple, tuple] | None = None
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
                got = marshal.loads(path.read_bytes())
            except (OSError, EOFError, ValueError, TypeError):
                got = None
            if isinstance(got, dict) and got.get("format") == FORMAT \
                    and isinstance(got.get("plans"), dict):
                _plans = got["plans"]
    return _plans


def get(key: tuple) -> tuple | None:
    """The plan fields stored under ``key``, None when there are none or they are
    malformed."""
    fields = _load().get(key)
    return fields if fields is not None and _well_formed(fields) else None


def put(key: tuple, fields: tuple) -> None:
    """Store a plan's fields under ``key`` (on disk at the next :func:`flush`)."""
    global _dirty
    plans = _load()
    if key in plans or len(plans) < MAX_PLANS:  # (a stored plan under key was malformed)
        plans[key] = fields
        _dirty = True


def flush() -> None:
    """Write the plans when some were added since the file was read (best effort,
    atomic)."""
    global _dirty
    if not _dirty:
        return
    _dirty = False
    path = cache_file()
    if path is not None:
        schema_cache.write_atomic(path, marshal.dumps({"format": FORMAT, "plans": _plans}))


def _well_formed(fields: object) -> bool:
    """The shape of :class:`~opshift.passes.decompose._Plan`'s fields, every slot in range
    (what a damaged file could get wrong without marshal noticing)."""
    if not (isinstance(fields, tuple) and len(fields) == 4):
        return False
    suffixes, nodes, consts, uses_slope = fields
    if not (isinstance(suffixes, tuple) and suffixes and isinstance(nodes, tuple) and nodes
            and isinstance(consts, tuple) and isinstance(uses_slope, bool)
            and all(isinstance(s, str) for s in suffixes)
            and all(isinstance(c, bytes) for c in consts)):
        return False
    slots = 4 + len(suffixes) + len(consts)  # see _Plan: X, Y, S, "", names, constants
    return all(isinstance(node, tuple) and node
               and all(isinstance(i, int) and 0 <= i < slots for i in node) for node in nodes)
