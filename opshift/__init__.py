"""opshift: exact opset conversion, inlining and fusion of PRelu, LeakyRelu and Selu in ONNX.

Public API (each job's package imports what it uses when called, so ``import opshift`` stays
cheap)::

    opshift.evaluate(model, inputs)          # bundled version-aware NumPy evaluator
    opshift.verify(reference, candidate)     # compare two models on the same inputs
    opshift.convert(model, opset)            # exact opset up/downgrade
    opshift.inline(model, ops=None, functions=None, *, allow_nonfinite_slope=False)
    opshift.fuse(model)
    opshift.fix(model)
    opshift.inspect(model)

Layout: one package per job (convert, inline, fuse, fix, inspect, verify, evaluator); check
(the structural check), graph (the model's facts and edits), io (models and tensors in and
out), plugins (onnx_ir, onnxscript, onnx-graphsurgeon) and cli.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

# Each job's package and its function share a name: importing the function here binds
# ``opshift.convert`` to it for good (Python sets a package attribute only on first import).
from opshift.convert import convert
from opshift.errors import OpshiftError
from opshift.fix import fix
from opshift.fuse import fuse
from opshift.graph import constant_values as _constant_values
from opshift.inline import inline
from opshift.inspect import inspect
from opshift.verify import verify

__version__ = "0.1.0"

__all__ = ["__version__", "OpshiftError", "VerifyReport", "convert", "evaluate", "fix", "fuse",
           "inline", "inspect", "verify"]


def evaluate(model: Any, inputs: Mapping[str, Any], *,
             capture: Collection[str] = ()) -> dict[str, Any]:
    """Run ``model`` on ``inputs`` with the bundled, version-aware NumPy evaluator; see
    :func:`opshift.evaluator.evaluate`."""
    from opshift.evaluator import evaluate as run

    return run(model, inputs, capture=capture)


# The graph's constant folding (shape rules, conversion's rescues) computes values with the
# evaluator, which sits above the graph: registered here, imported when first used.
_constant_values.use_evaluator(evaluate)


def __getattr__(name: str) -> Any:
    """``opshift.VerifyReport``, imported on first use: the verify package's modules cost
    the commands that check nothing a tenth of their start-up."""
    if name == "VerifyReport":
        from opshift.verify.report import VerifyReport

        return VerifyReport
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
