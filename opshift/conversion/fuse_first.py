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
    """What the planner raises (when asked to collect refusals) when some node's op does not
    exist at the target (a :class:`MissingOpError`): every refusal, in planning order, as
    (node, name, scope label, version, error)."""

    def __init__(self, refused: list[tuple[onnx.NodeProto, str, str, int, MissingOpError]]
                 ) -> None:
        super().__init__(str(refused[0][-1]))
        self.refused = refused


def fuse_then_plan(model: onnx.ModelProto, plan: Callable[[onnx.ModelProto], list],
                   target: int, *, record: bool, base_dir) -> tuple[list, list]:
    """``plan(model)``'s entries; where it raises :class:`MissingOps`, the regions holding
    the nodes whose op does not exist at ``target`` are fused, and the fused model planned
    instead (and moved into ``model`` once planned): fusing may also take away nodes refused
    for other reasons (a Mul of the body that legacy broadcasting cannot express).

    Returns the fusions (as changes) followed by the planner's entries, and the fusions'
    regions (``record``: for verification). Raises :class:`ConversionError` when no refused
    node is in a region fuse fuses, or the fused model is refused; ``model`` is then
    unchanged.
    """
    work, fusions, regions = model, [], []
    while True:
        try:
            entries = plan(work)
            break
        except MissingOps as m:
            work, done, made = _fuse(work, m.refused, target, record, base_dir)
            fusions += done
            regions += made
        except ConversionError as e:
            if not fusions:
                raise
            ops = ", ".join(dict.fromkeys(c.op for c in fusions))
            raise type(e)(f"{e} (after fusing {len(fusions)} region(s) into single ops first, "
                          f"because {ops} does not exist at opset {target})") from None
    if work is not model:
        model.CopyFrom(work)
    return fusions + entries, regions


def _fuse(model: onnx.ModelProto, refused: list, target: int, record: bool, base_dir
          ) -> tuple[onnx.ModelProto, list[Change], list]:
    """The regions of ``model`` holding ``refused`` nodes fused; the fusions as changes;
    their regions."""
    from ..passes.fuse import fuse_proto

    fused, res = fuse_proto(model, only=[(r[0], k) for k, r in enumerate(refused)
                                         if isinstance(r[-1], MissingOpError)],
                            capture_regions=record, base_dir=base_dir)
    if not res.fused:  # the first refusal, as planning in order gives it
        first = refused[0][-1]
        more = "".join(f"; fuse refused the pattern ending at node {e.node!r} ({e.op}) "
                       f"[{e.rule}]: {e.detail}" for e in res.refused[:1]
                       if isinstance(first, MissingOpError))
        raise type(first)(f"{first}{more}") from None
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
