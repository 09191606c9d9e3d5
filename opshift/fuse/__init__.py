"""``fuse``: decomposed PRelu / LeakyRelu / Selu patterns back into single ops, where exact.

The rules are onnxscript pattern rules (:mod:`.rules`, one module per family); :mod:`.engine`
runs them over ``onnx_ir`` and records every fusion and refusal (:mod:`.report`);
:mod:`.driver` fuses a ``ModelProto``'s scopes, writing back only the fused regions;
:mod:`.values` is what the rules read of the IR values, :mod:`.region` the small models
``--verify`` checks each fusion on.
"""

from __future__ import annotations

from typing import Any

__all__ = ["fuse"]


def fuse(model: Any, *, allow_rounding: bool = False) -> Any:
    """Fuse decomposed PRelu / LeakyRelu / Selu patterns back into single ops where exact.

    Accepts an ``onnx.ModelProto``, an ``onnx_ir.Model`` or a path; returns the same kind
    (a ModelProto for a path). The input is not modified.
    :func:`opshift.fuse.driver.fuse_with_result` also returns what was fused and refused.
    """
    from opshift.fuse.driver import fuse_with_result

    return fuse_with_result(model, allow_rounding=allow_rounding)[0]
