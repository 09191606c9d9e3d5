"""Fusing and folding before converting, where that is the only way.

A node whose op does not exist at the target opset and has no exact replacement there (Where
below opset 7, ...) is refused. When such a node lies in a region that ``fuse``'s rules fuse
exactly into PRelu, LeakyRelu or Selu -- the function bodies of those ops that exporters and
onnx's ``_expanded`` models write out are such regions -- the region is fused first and the
fused model is converted: the single op exists at every opset, and fusing it is exact by
fuse's own checks. Only the regions holding refused nodes are fused (by the fuse pass
itself), nothing else; each fusion is reported as a change saying which nodes were fused and
why. A node refused because it needs as a constant a value computed from constants alone has
that value folded first (:mod:`.fold_first`), a refused If is replaced by the branch its
condition takes where constants and shapes decide it (:mod:`.taken_branch`), each reported the
same way. Whatever none of these helps is refused as before, naming node, op and version; the
model is changed only when the whole conversion is planned.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx

from opshift import opsets
from opshift.convert.result import Change
from opshift.errors import BranchNeededError, ConstantNeededError, ConversionError, MissingOpError


class Refusals(Exception):
    """What the planner raises (when asked to collect refusals) when fusing or folding first
    may help (a :class:`MissingOpError` or a :class:`ConstantNeededError` is among them):
    every refusal, in planning order, as (node, name, scope label, version, error)."""

    def __init__(self, refused: list[tuple[onnx.NodeProto, str, str, int, ConversionError]],
                 scopes: list) -> None:
        super().__init__(str(refused[0][-1]))
        self.refused = refused
        self.scopes = scopes  # the planned model's scopes, which the refusals name

    @staticmethod
    def may_help(e: ConversionError) -> bool:
        return isinstance(e, (MissingOpError, ConstantNeededError, BranchNeededError))


def plan_after_fusing_and_folding(model: onnx.ModelProto,
                                  plan: Callable[[onnx.ModelProto], list], source: int,
                                  target: int, *, record: bool, base_dir
                                  ) -> tuple[list, list]:
    """``plan(model)``'s entries; where it raises :class:`Refusals`, the values refused
    nodes need as constants are folded where they can be, else the regions holding the nodes
    whose op does not exist at ``target`` are fused, and the new model planned instead (and
    moved into ``model`` once planned): fusing or folding may also take away nodes refused
    for other reasons (a Mul of the body that legacy broadcasting cannot express, the Slice
    reversing a Pad's computed pads).

    Returns the fusions and folds (as changes) followed by the planner's entries, and the
    fusions' regions (``record``: for verification). Raises :class:`ConversionError` when
    neither helps, or the new model is refused; ``model`` is then unchanged.
    """
    work, firsts, regions = model, [], []
    while True:
        try:
            entries = plan(work)
            break
        except Refusals as r:
            # (imported here: most plans refuse nothing, and need neither)
            from opshift.convert.rescue.fold_first import fold
            from opshift.convert.rescue.taken_branch import take_branches

            folded = (take_branches(work, source, r.refused, r.scopes)
                      or fold(work, source, r.refused, r.scopes))
            if folded is not None:
                work, done = folded
                firsts += done
                continue
            if not any(isinstance(x[-1], MissingOpError) for x in r.refused):
                _raise_after(r.refused[0][-1], firsts, target)
            try:
                work, done, made = _fuse(work, r.refused, target, record, base_dir)
            except ConversionError as e:
                _raise_after(e, firsts, target)
            firsts += done
            regions += made
        except ConversionError as e:
            _raise_after(e, firsts, target)
    if work is not model:
        model.CopyFrom(work)
    return firsts + entries, regions


def _at(op: str, target: int) -> str:
    """``LeakyRelu-6``: ``op`` in its version at ``target`` (just ``op`` if none)."""
    v = opsets.since_version(op, target)
    return op if v is None else f"{op}-{v}"


def _raise_after(e: ConversionError, firsts: list[Change], target: int) -> None:
    """Raise ``e``, saying what was fused or folded before it."""
    if not firsts:
        raise e
    said = []
    fused = [c for c in firsts if c.action == "fuse"]
    if fused:
        ops = ", ".join(dict.fromkeys(c.op for c in fused))
        said.append(f"fusing {len(fused)} region(s) into single ops first, because {ops} "
                    f"does not exist at opset {target}")
    taken = sum(c.action == "take_branch" for c in firsts)
    if taken:
        said.append(f"replacing {taken} If node(s) by the branch their condition takes first")
    if len(fused) + taken < len(firsts):
        said.append(f"folding {len(firsts) - len(fused) - taken} value(s) computed from "
                    "constants into initializers first")
    raise type(e)(f"{e} (after {' and '.join(said)})") from None


def _fuse(model: onnx.ModelProto, refused: list, target: int, record: bool, base_dir
          ) -> tuple[onnx.ModelProto, list[Change], list]:
    """The regions of ``model`` holding ``refused`` nodes fused; the fusions as changes;
    their regions."""
    from opshift.fuse.driver import fuse_proto

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
               if e.zero_sign else "") + f", and {op} exists at opset {target}",
            into=_at(op, target)))
    return fused, changes, res.regions
