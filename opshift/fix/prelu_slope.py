"""PRelu (version >= 7) with a 1-D slope ``[C]`` that only makes sense per channel: the
slope becomes ``[C, 1, ..., 1]`` by the same edits convert uses (the constant reshaped,
copied first if shared, or an Unsqueeze valid at the opset when it is dynamic)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx

from opshift import broadcast, opsets
from opshift.fix.report import node_id
from opshift.graph.edit import Edits, Pending, axes_nodes
from opshift.graph.facts import Facts
from opshift.graph.scopes import Scope

if TYPE_CHECKING:
    from opshift.fix.fixer import Fixer


def fix_prelu_slopes(fx: Fixer) -> None:
    """Reshape every PRelu slope that only makes sense per channel to ``[C, 1, ..., 1]``."""
    if not any(map(_slopes_to_check, fx.scopes())):
        return  # (the fixer's scopes, listed already: Facts lists its own)
    facts = fx.facts()
    edits = Edits(facts)
    seen: dict = {}  # (X shape, slope shape, version) -> its reading, judged once
    for scope in facts.scopes():
        ver = _slopes_to_check(scope)
        if ver is None:
            continue
        for i, node in enumerate(scope.nodes):
            if (node.op_type == "PRelu" and opsets.normalize_domain(node.domain) == ""
                    and len(node.input) >= 2):
                _prelu_slope(fx, facts, edits, scope, i, node, ver, seen)
    edits.write()


def _slopes_to_check(scope: Scope) -> int | None:
    """The version of PRelu in ``scope`` when it broadcasts as numpy does and the scope has
    PRelu nodes, else None."""
    ver = opsets.since_version("PRelu", scope.opset) if scope.opset else None
    if ver is None or broadcast.rule_for_version(ver) is not broadcast.SlopeRule.NUMPY:
        return None
    return ver if any(op == "PRelu" for op, _ in scope.kinds) else None


def _prelu_slope(fx: Fixer, facts: Facts, edits: Edits, scope: Scope, i: int,
                 node: onnx.NodeProto, ver: int, seen: dict) -> None:
    slope = node.input[1]
    const = facts.constant(scope, slope)
    if const is not None and const.scope is not scope:
        const = None  # an enclosing graph's constant: read through an Unsqueeze
    nid = node_id(node, i)
    if scope.root.function is not None:
        # X's shape depends on each call site; names in a function body are their own
        # namespace, so graph shapes say nothing about them.
        dims = list(const.tensor.dims) if const is not None else []
        if len(dims) == 1 and dims[0] > 1:
            fx.leave("prelu_slope", scope.label, nid, f"1-D slope {slope!r} {dims} not "
                       "checked", "X's shape inside a function depends on the call "
                       "site, so its reading cannot be decided")
        return
    xs = facts.shape(node.input[0])
    ss = tuple(const.tensor.dims) if const is not None else facts.shape(slope)
    if xs is None or ss is None:
        return
    key = (xs, ss, ver)
    verdict = seen.get(key, _UNSET)
    if verdict is _UNSET:
        verdict = seen[key] = _reading(xs, ss, ver, fx.prelu_slope)
    if verdict is None:
        return
    action, what, why, target = verdict
    if action == "refuse":
        fx.refuse("prelu_slope", scope.label, nid, f"slope {slope!r} {what}", why)
        return
    if action == "leave":
        fx.leave("prelu_slope", scope.label, nid, what, why)
        return
    what = f"slope {slope!r} {what}"
    prefix: list[onnx.NodeProto] = []
    if const is not None:
        pending = Pending()
        read, how = edits.reshaped_constant(pending, scope, slope, const, tuple(target),
                                            prefix)
        how = f"constant {how}"
        edits.commit(pending)
    else:  # dynamic slope: Unsqueeze it to [C, 1, ..., 1]
        axes = list(range(1, len(target)))
        read = edits.names.fresh(f"{slope}_per_channel")
        prefix = axes_nodes("Unsqueeze", slope, read, axes, scope.opset, edits.names,
                            edits.new_node)
        how = f"Unsqueeze {prefix[-1].name!r} inserted (axes {axes})"
    if prefix:
        edits.replace(scope, i, [*prefix, node], {1: read})
    elif read != slope:
        edits.replace(scope, i, [node], {1: read})
    fx.change("prelu_slope", scope.label, nid, f"{what} ({how})", why)


_UNSET = object()


def _reading(xs: tuple, ss: tuple, ver: int, choice: str | None
             ) -> tuple[str, str, str, list[int]] | None:
    """What to do with a slope of shape ``ss`` on X of shape ``xs`` at PRelu-``ver`` (the
    user's ``choice`` of reading for an ambiguous one): None (nothing), or (``"refuse"``,
    ``"leave"`` or ``"change"``, what (after the slope's name for refuse and change), why,
    the slope's new shape)."""
    if (all(isinstance(d, int) for d in (*xs, *ss))
            and broadcast.numpy_shape(xs, ss) is None
            and not broadcast.legacy_is_per_channel(xs, ss)):
        return ("refuse", f"{list(ss)} does not broadcast to X {list(xs)}",
                "no reading (numpy, or per channel on axis 1) fits, so there is nothing "
                "exact to repair", [])
    if len(ss) != 1 or len(xs) < 3:
        return None
    c = ss[0]
    if not isinstance(c, int) or c == 1 or xs[1] != c:
        return None
    if not broadcast.legacy_is_per_channel(xs, ss):
        return None
    last = xs[-1]
    target = [c] + [1] * (len(xs) - 2)
    what = f"{list(ss)} -> {target} so it applies per channel on axis 1"
    if last == c or not isinstance(last, int):
        amb = (f"X {list(xs)}: the 1-D slope of {c} fits both axis 1 (per channel, "
               "legacy PRelu <= 6) and the last axis (numpy)")
        if choice == "numpy":
            return ("leave", "kept the numpy (last-axis) reading",
                    amb + "; --prelu-slope=numpy", target)
        if choice != "channel":
            return ("leave", "ambiguous slope; choose with --prelu-slope=channel|numpy", amb,
                    target)
        return "change", what, amb + "; --prelu-slope=channel", target
    return ("change", what, f"X {list(xs)}: numpy broadcasting (PRelu-{ver}) cannot apply a "
            f"slope of {c} to a last axis of {last}; it only makes sense per channel on "
            "axis 1 (as PRelu <= 6 read it)", target)
