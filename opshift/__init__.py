"""opshift: exact opset conversion, inlining and fusion of PRelu, LeakyRelu and Selu in ONNX.

Public API (imported lazily so that ``import opshift`` stays cheap)::

    opshift.evaluate(model, inputs)          # bundled version-aware NumPy evaluator
    opshift.verify(reference, candidate)     # compare two models on the same inputs
    opshift.convert(model, opset)            # exact opset up/downgrade
    opshift.inline(model, ops=None, functions=None, *, allow_nonfinite_slope=False)
    opshift.fuse(model)
    opshift.fix(model)
    opshift.inspect(model)
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "evaluate": "opshift.evaluator",
    "convert": "opshift.passes.convert",
    "inline": "opshift.passes.inline",
    "fuse": "opshift.passes.fuse",
    "fix": "opshift.passes.fix",
    "OpshiftError": "opshift.errors",
}

__all__ = ["__version__", "verify", "VerifyReport", "inspect", *_LAZY]

# ``verify`` and ``inspect`` are both submodules and functions. Binding the functions here,
# after the submodules are imported, keeps ``opshift.verify(...)`` callable however the
# submodule is imported later (Python sets the package attribute only on first import).
from opshift.inspect import inspect  # noqa: E402
from opshift.verify import VerifyReport, verify  # noqa: E402


def __getattr__(name: str) -> Any:
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'opshift' has no attribute {name!r}")
    value = getattr(importlib.import_module(mod), name)
    globals()[name] = value
    return value
