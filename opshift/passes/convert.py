"""``convert`` on any kind of model and the ``onnx_ir`` pass ``ConvertOpsetPass``: thin
adapters over :func:`opshift.conversion.engine.convert_proto`, the exact conversion of a
``ModelProto`` in place."""

from __future__ import annotations

from typing import Any

import onnx

from opshift.conversion.engine import ConvertResult, check_target, convert_proto
from opshift.modelio import ModelLike, from_proto, to_proto
from opshift.passes.ir_pass import lazy_attribute, run_as_ir_pass

__all__ = ["ConvertResult", "convert", "convert_proto"]  # and ConvertOpsetPass, made on use


def convert(model: ModelLike, opset: int, *, verbose_log=None,
            keep_node_metadata: bool = False) -> Any:
    """Convert ``model`` (ModelProto, onnx_ir.Model or path) to default-domain ``opset``.

    Returns the converted model of the same kind (a ModelProto for a path); the object
    passed in is not modified. A node whose op does not exist at ``opset`` (Where below 7)
    in a region ``fuse`` fuses exactly into PRelu/LeakyRelu/Selu is fused into that op first
    (``verbose_log`` says so). Where the IR version goes below 10, which defines node
    metadata, it is dropped; ``keep_node_metadata=True`` moves it into the model's
    ``metadata_props`` instead, each entry as ``node:<node name>:<key>``
    (:func:`opshift.ir_versions.node_metadata_to_model`). Raises :class:`ConversionError`
    naming the node when some rewrite cannot be exact.
    """
    proto, kind, base_dir = to_proto(model)
    if kind == "proto":
        work = onnx.ModelProto()
        work.CopyFrom(proto)
    else:
        work = proto  # already a fresh proto (serialized or loaded)
    convert_proto(work, opset, verbose_log=verbose_log, base_dir=base_dir,
                  keep_node_metadata=keep_node_metadata)
    return from_proto(work, "proto" if kind == "path" else kind)


def _make_pass_class():
    # onnx_ir (which imports sympy, ~1 s) is loaded only when the pass is asked for, so the
    # command line and convert() never pay for it
    from onnx_ir.passes import InPlacePass

    class ConvertOpsetPass(InPlacePass):
        """``onnx_ir`` pass converting a model to default-domain ``opset``: a thin adapter
        over :func:`convert_proto` (serialize once, convert, move the result into the given
        model object)."""

        def __init__(self, opset: int):
            super().__init__()
            check_target(opset)
            self.opset = opset
            self.last_result: ConvertResult | None = None

        def call(self, model):
            self.last_result, out = run_as_ir_pass(
                model, lambda proto: convert_proto(proto, self.opset), _replace_model_contents)
            return out

    ConvertOpsetPass.__module__ = __name__
    ConvertOpsetPass.__qualname__ = "ConvertOpsetPass"
    return ConvertOpsetPass


__getattr__ = lazy_attribute(globals(), "ConvertOpsetPass", _make_pass_class)


def _replace_model_contents(model, new) -> None:
    """Make ``model`` (an onnx_ir.Model) hold ``new``'s graph, functions and versions, so
    the pass stays in place for the caller's object."""
    for slot in ("_functions", "graph", "ir_version", "doc_string", "domain", "model_version",
                 "producer_name", "producer_version", "_metadata_props"):
        setattr(model, slot, getattr(new, slot))
