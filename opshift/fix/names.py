"""Names: values produced twice (the later producer and its uses renamed; refused for a
graph or function output) and duplicate node names (renamed)."""

from __future__ import annotations

from itertools import chain
from typing import TYPE_CHECKING

import onnx

from opshift.fix.report import node_id
from opshift.graph.names import Names
from opshift.graph.scopes import Scope, subgraphs

if TYPE_CHECKING:
    from opshift.fix.fixer import Fixer


def fix_value_names(fx: Fixer, scope: Scope) -> None:
    """Rename a value produced a second time (and its later uses) in ``scope``."""
    if scope.graph is not None:
        defined = {v.name for v in scope.graph.input}
        defined |= {t.name for t in scope.graph.initializer}
        outputs = {v.name for v in scope.graph.output}
    else:
        f = scope.function
        defined = set(f.input)
        outputs = set(f.output)
    defined.discard("")
    outs = list(chain.from_iterable(n.output for n in scope.nodes))
    produced = set(outs)
    # ("" is an absent optional output, which may repeat)
    if len(produced) + max(outs.count("") - 1, 0) == len(outs) and \
            defined.isdisjoint(produced):
        return  # each value is defined once (the common case: one look at every name)
    rename: dict[str, str] = {}
    names: Names | None = None
    for i, node in enumerate(scope.nodes):
        if rename:
            _rename_uses(node, rename)
        seen_here: set[str] = set()
        for k, out in enumerate(node.output):
            if not out:
                continue
            if out in seen_here:
                fx.refuse("value_name", scope.label, node_id(node, i),
                            f"output {out!r} appears twice on the same node",
                            "which output is meant cannot be decided")
                continue
            seen_here.add(out)
            if out not in defined:
                defined.add(out)
                rename.pop(out, None)
                continue
            if out in outputs:
                fx.refuse("value_name", scope.label, node_id(node, i),
                            f"value {out!r} is produced twice and is an output of "
                            f"{scope.label}", "which producer is the output is ambiguous")
                continue
            names = names or Names(fx.model)
            new = names.fresh(out)
            node.output[k] = new
            rename[out] = new
            fx.change("value_name", scope.label, node_id(node, i),
                        f"renamed output {out!r} to {new!r} and its later uses",
                        f"{out!r} was already defined earlier in the scope (SSA "
                        "violation); later nodes read the latest definition")


def fix_node_names(fx: Fixer) -> None:
    """Node names are unique per graph tree (main graph with its subgraphs) and per
    function body; later duplicates get fresh names."""
    names: Names | None = None
    seen: dict[str, set[str]] = {}
    for scope in fx.scopes():
        root = scope.label.split("/", 1)[0]  # the main graph, or the function
        used = seen.setdefault(root, set())
        given = [x for x in (n.name for n in scope.nodes) if x]
        if len(set(given)) == len(given) and used.isdisjoint(given):
            used.update(given)  # no name repeats (the common case)
            continue
        for i, n in enumerate(scope.nodes):
            if not n.name:
                continue
            if n.name in used:
                names = names or Names(fx.model)
                old = n.name
                n.name = names.fresh(old)
                fx.change("node_name", scope.label, repr(old),
                            f"renamed this {n.op_type} node (#{i}) to {n.name!r}",
                            f"another node is already named {old!r}; node names must be "
                            "unique")
            used.add(n.name)


def _rename_uses(node: onnx.NodeProto, rename: dict[str, str]) -> None:
    for k, name in enumerate(node.input):
        if name in rename:
            node.input[k] = rename[name]
    for _, g in subgraphs(node):
        local = {v.name for v in g.input} | {t.name for t in g.initializer}
        inner = {k: v for k, v in rename.items() if k not in local}
        if not inner:
            continue
        for n in g.node:
            _rename_uses(n, inner)
            inner = {k: v for k, v in inner.items() if k not in set(n.output)}
        for v in g.output:
            if v.name in inner:
                v.name = inner[v.name]

