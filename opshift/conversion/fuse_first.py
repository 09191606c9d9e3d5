"""Fusing before converting, where that is the only way.

A node whose op does not exist at the target opset and has no exact replacement there (Where
below opset 9, ...) is refused. When such a node lies in a region that ``fuse``'s rules fuse
exactly into PRelu, LeakyRelu or Selu -- the function bodies of those ops that exporters and
onnx's ``_expanded`` models write out are such regions -- the region is fused first and the
fused model is converted: the single op exists at every opset, and fusing it is exact by
fuse's own checks. Only the regions holding refused nodes are fused (by the fuse pass itself),
nothing else; each fusion is reported as a change saying which nodes were fused and why.
Whatever fuse cannot fuse is refused as before, naming node, op and version; the model is
changed only when the whole conversion is planned.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx

from ..errors import ConversionError, MissingOpError
from .result import Change


class MissingOps(Exception):
    """What the planner raises (when asked to collect) instead of the first
    :class:`MissingOpError`: every node refused so, as (node, name, scope label, version,
    error)."""

    def __init__(self, refused: list[tuple[onnx.NodeProto, str, str, int, MissingOpError]]
                 ) -> None:
        super().__init__(str(refused[0][-1]))
        self.refused = refused


def fuse_then_plan(model: onnx.ModelProto, plan: Callable[[onnx.ModelProto], list],
                   target: int, *, record: bool, base_dir) -> tuple[list, list]:
    """``plan(model)``'s entries; where it raises :class:`MissingOps`, the regions holding
    those nodes are fused and the fused model planned instead (and moved into ``model`` once
    planned). Returns the fusions (as changes) and the planner's entries, and the fusions'
    regions (``record``: for verification). Raises :class:`ConversionError` when a refused
    node is in no region fuse fuses, or the fused model is refused; ``model`` is then
    unchanged."""
    work, fusions, regions, ops = model, [], [], []
    while True:
        try:
            entries = plan(work)
            break
        except MissingOps as m:
            work, done, made = _fuse(work, m.refused, target, record, base_dir)
            fusions += done
            regions += made
            ops += [m.refused[0][0].op_type]
        except ConversionError as e:
            if not fusions:
                raise
            raise type(e)(f"{e} (after fusing {len(fusions)} region(s) into single ops first, "
                          f"because {', '.join(dict.fromkeys(ops))} does not exist at opset "
                          f"{target})") from None
    if work is not model:
        model.CopyFrom(work)
    return fusions + entries, regions


def _fuse(model: onnx.ModelProto, refused: list, target: int, record: bool, base_dir
          ) -> tuple[onnx.ModelProto, list[Change], list]:
    """The regions of ``model`` holding ``refused`` nodes fused; the fusions as changes;
    their regions."""
    from ..passes.fuse import fuse_proto

    fused, res = fuse_proto(model, only=[(r[0], k) for k, r in enumerate(refused)],
                            capture_regions=record, base_dir=base_dir)
    if not res.fused:
        first = refused[0][-1]
        more = "".join(f"; fuse refused the pattern ending at node {e.node!r} ({e.op}) "
                       f"[{e.rule}]: {e.detail}" for e in res.refused[:1])
        raise ConversionError(f"{first}{more}") from None
    changes = []
    for e in res.fused:
        node, name, scope, version, err = refused[e.tags[0]]
        op = e.detail.split("(")[0]
        changes.append(Change(
            name, node.op_type, scope, version, None, "fuse",
            f"fused {', '.join(e.matched)} into {e.detail} first",
            f"{err.reason}; these nodes are exactly {op} by opshift fuse's checks [{e.rule}]"
            + (f" (but for the sign of zero, as fuse allows for this form: {e.zero_sign})"
               if e.zero_sign else "") + f", and {op} exists at opset {target}"))
    return fused, changes, res.regions
