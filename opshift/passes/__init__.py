"""Graph passes. Each job has a core over ``onnx.ModelProto`` (the fast path: edit in place,
touch only the nodes that change) and an ``onnx_ir.passes.InPlacePass`` adapter over it."""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    "ConvertOpsetPass": "opshift.passes.convert",
    "InlinePass": "opshift.passes.inline",
    "FusePass": "opshift.passes.fuse",
    "FixPass": "opshift.passes.fix",
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'opshift.passes' has no attribute {name!r}")
    return getattr(importlib.import_module(mod), name)
