"""``inspect``: what a model holds of PRelu, LeakyRelu and Selu, and what fix, fuse and
convert would do (:mod:`.report`), as text for people (:mod:`.text`)."""

from __future__ import annotations

import os
from typing import Any

__all__ = ["inspect"]


def inspect(model: Any, opset: int | None = None, *,
            base_dir: str | os.PathLike | None = None) -> Any:
    """Report on ``model`` (ModelProto, onnx_ir.Model or path) without modifying it: an
    :class:`~opshift.inspect.report.InspectReport` of its opsets, IR version and node count,
    one row per activation node, the patterns fuse would fuse, the defects fix would repair
    and, with ``opset=N``, what convert would do (dry runs on copies). ``base_dir``: the
    folder of a ModelProto's external data."""
    from opshift.inspect.report import inspect_model

    return inspect_model(model, opset, base_dir=base_dir)
