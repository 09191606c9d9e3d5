"""``fix`` on any kind of model and the ``onnx_ir`` pass ``FixPass``: thin adapters over
:func:`opshift.repair.fixer.fix_proto`, the repairs of a ``ModelProto`` in place (one module
per repair in :mod:`opshift.repair`)."""

from __future__ import annotations

import os
from typing import Any

import onnx

from opshift.census import Census
from opshift.modelio import ModelLike, from_proto, to_proto
from opshift.passes.ir_pass import lazy_attribute, run_as_ir_pass
from opshift.repair.fixer import SLOPE_CHOICES, fix_proto
from opshift.repair.report import FixChange, FixResult
from opshift.repair.verification import verify_fix

__all__ = ["SLOPE_CHOICES", "FixChange", "FixResult", "fix", "fix_proto",
           "fix_with_result", "verify_fix"]  # and FixPass, made on first use


def fix(model: ModelLike, *, prelu_slope: str | None = None) -> Any:
    """Return a repaired copy of ``model`` (ModelProto, onnx_ir.Model, or path -> ModelProto).

    The input is not mutated. Raises :class:`ConversionError` if a defect cannot be repaired
    exactly. Use :func:`fix_proto` to also get the list of changes.
    """
    proto, kind, base_dir = to_proto(model)
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    fix_proto(copy, prelu_slope=prelu_slope, base_dir=base_dir)
    return from_proto(copy, kind)


def fix_with_result(model: ModelLike, *, prelu_slope: str | None = None,
                    strict: bool = True, base_dir: str | os.PathLike | None = None,
                    census: Census | None = None) -> tuple[onnx.ModelProto, FixResult]:
    """Like :func:`fix` but returns ``(fixed ModelProto copy, FixResult)``; ``base_dir``:
    the folder of a ModelProto's external data; ``census``: as for :func:`fix_proto`."""
    proto, _, folder = to_proto(model)
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return copy, fix_proto(copy, prelu_slope=prelu_slope, strict=strict,
                           base_dir=folder if base_dir is None else base_dir, census=census)


def _make_fix_pass() -> type:
    import onnx_ir as ir
    import onnx_ir.passes as ir_passes

    class FixPass(ir_passes.InPlacePass):
        """``onnx_ir`` adapter over :func:`fix_proto`. ``modified`` is True only if a fix was
        made. The last run's :class:`FixResult` is kept in :attr:`last_result`."""

        def __init__(self, prelu_slope: str | None = None):
            super().__init__()
            self.prelu_slope = prelu_slope
            self.last_result: FixResult | None = None

        def call(self, model: ir.Model) -> ir_passes.PassResult:
            self.last_result, out = run_as_ir_pass(
                model, lambda proto: fix_proto(proto, prelu_slope=self.prelu_slope))
            return out

    FixPass.__module__ = __name__
    return FixPass


__getattr__ = lazy_attribute(globals(), "FixPass", _make_fix_pass)

