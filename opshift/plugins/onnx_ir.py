"""opshift's jobs as ``onnx_ir`` passes: :class:`ConvertOpsetPass`, :class:`InlinePass`,
:class:`FusePass` and :class:`FixPass`, each an ``InPlacePass`` with one ``call``.

Convert, inline and fix run their ``ModelProto`` core on a serialized copy and hand the
result back in the same ``onnx_ir.Model`` object; fuse works on the IR itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import onnx
import onnx_ir as ir
from onnx_ir import passes as ir_passes

from opshift.convert.engine import ConvertResult, check_target, convert_proto
from opshift.fix.fixer import fix_proto
from opshift.fix.report import FixResult
from opshift.fuse.engine import FuseResult, fuse_ir, fuse_typed
from opshift.inline.inliner import inline_proto
from opshift.inline.result import InlineResult
from opshift.memory import no_cyclic_gc

__all__ = ["ConvertOpsetPass", "FixPass", "FusePass", "InlinePass"]


def replace_ir_model(model: ir.Model, new: ir.Model) -> None:
    """Make ``model`` (the ``onnx_ir.Model`` a pass manager holds) become ``new`` in place:
    the passes convert a serialized copy and must hand back the same object."""
    for cls in type(model).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot != "__weakref__" and hasattr(new, slot):
                setattr(model, slot, getattr(new, slot))
    if hasattr(new, "__dict__"):
        model.__dict__.update(new.__dict__)


def run_on_proto(model: ir.Model, run: Callable[[onnx.ModelProto], Any]
                 ) -> tuple[Any, ir_passes.PassResult]:
    """Serialize ``model``, ``run`` a ModelProto core on the copy, and when its result says
    it modified it, make ``model`` hold the result. Returns (the core's result, the
    ``PassResult``)."""
    proto = ir.serde.serialize_model(model)
    result = run(proto)
    if result.modified:
        replace_ir_model(model, ir.serde.deserialize_model(proto))
    return result, ir_passes.PassResult(model, modified=bool(result.modified))


class ConvertOpsetPass(ir_passes.InPlacePass):
    """Convert a model to default-domain ``opset`` (:func:`opshift.convert`); the last
    :class:`~opshift.convert.result.ConvertResult` is :attr:`last_result`."""

    def __init__(self, opset: int):
        super().__init__()
        check_target(opset)
        self.opset = opset
        self.last_result: ConvertResult | None = None

    def call(self, model: ir.Model) -> ir_passes.PassResult:
        self.last_result, out = run_on_proto(model, lambda p: convert_proto(p, self.opset))
        return out


class InlinePass(ir_passes.InPlacePass):
    """Inline PRelu/LeakyRelu/Selu and model-local functions (:func:`opshift.inline`);
    ``modified`` is True only if something was inlined. The last
    :class:`~opshift.inline.result.InlineResult` is :attr:`last_result` (its ``notes`` name
    the nodes ``allow_nonfinite_slope`` let through)."""

    def __init__(self, ops: Iterable[str] | str | None = None,
                 functions: Iterable[str] | str | None = None, *,
                 allow_nonfinite_slope: bool = False):
        super().__init__()
        self.ops = ops
        self.functions = functions
        self.allow_nonfinite_slope = allow_nonfinite_slope
        self.last_result: InlineResult | None = None

    def call(self, model: ir.Model) -> ir_passes.PassResult:
        self.last_result, out = run_on_proto(model, lambda p: inline_proto(
            p, self.ops, self.functions, allow_nonfinite_slope=self.allow_nonfinite_slope))
        return out


class FusePass(ir_passes.InPlacePass):
    """Run the fusion rules in place (:func:`opshift.fuse`); ``modified`` is True only if a
    pattern was fused. The checks need static types and shapes: with ``infer_shapes`` (the
    default) the pass serializes the model once and runs onnx shape inference on it, using
    the result without writing it into the model; without, only the types the model carries
    are used. The last :class:`~opshift.fuse.engine.FuseResult` is :attr:`last_result`."""

    def __init__(self, *, allow_rounding: bool = False, infer_shapes: bool = True) -> None:
        super().__init__()
        self.allow_rounding = allow_rounding
        self.infer_shapes = infer_shapes
        self.last_result: FuseResult | None = None

    def call(self, model: ir.Model) -> ir_passes.PassResult:
        with no_cyclic_gc():
            if self.infer_shapes:
                proto = ir.serde.serialize_model(model)
                self.last_result = fuse_typed(model, proto, allow_rounding=self.allow_rounding)
            else:
                self.last_result = fuse_ir(model, allow_rounding=self.allow_rounding)
        return ir_passes.PassResult(model, self.last_result.modified)


class FixPass(ir_passes.InPlacePass):
    """Repair the defects that break runtimes (:func:`opshift.fix`); ``modified`` is True
    only if a fix was made. The last :class:`~opshift.fix.report.FixResult` is
    :attr:`last_result`."""

    def __init__(self, prelu_slope: str | None = None):
        super().__init__()
        self.prelu_slope = prelu_slope
        self.last_result: FixResult | None = None

    def call(self, model: ir.Model) -> ir_passes.PassResult:
        self.last_result, out = run_on_proto(
            model, lambda p: fix_proto(p, prelu_slope=self.prelu_slope))
        return out
