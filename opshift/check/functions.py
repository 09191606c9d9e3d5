"""Model-local functions, well-formed: a header of text with valid opset imports, and no
function that calls itself (ONNX functions are not recursive: such a call could never be
inlined or run)."""

from __future__ import annotations

import onnx

from opshift.io.readable import not_text, opset_import_problem, text_problem
from opshift.opsets import normalize_domain


def function_problem(f: onnx.FunctionProto) -> tuple[str | None, bool]:
    """(a problem of model-local function ``f``'s header or None, whether its identity and
    signature are text: else its body cannot be labelled or walked)."""
    bad = text_problem([f.name, f.domain, f.overload, *f.input, *f.output, *f.attribute])
    if bad is not None:
        return f"function {not_text('name', bad)}", False
    p = opset_import_problem(f.opset_import)
    if p is not None:
        from opshift.errors import function_label

        return f"{function_label(f)}: {p}", True
    return None, True


def recursion_problem(model: onnx.ModelProto) -> str | None:
    """A model-local function that calls itself, directly or through others."""
    cycle = call_cycle(_calls(model))
    if cycle is None:
        return None
    path = " -> ".join(f"{d}::{n}" if d else n for d, n in cycle)
    return (f"function {path}: a function that calls itself cannot be inlined or run (ONNX "
            "functions are not recursive)")


def _calls(model: onnx.ModelProto) -> dict[tuple[str, str], set[tuple[str, str]]]:
    """Model-local function -> the model-local functions its body (subgraphs included)
    calls."""
    ids = {(normalize_domain(f.domain), f.name) for f in model.functions
           if isinstance(f.domain, str)}

    def called(nodes, out: set[tuple[str, str]]) -> set[tuple[str, str]]:
        for n in nodes:
            if isinstance(n.domain, str) and (normalize_domain(n.domain), n.op_type) in ids:
                out.add((normalize_domain(n.domain), n.op_type))
            for a in n.attribute:
                for g in [a.g] if a.type == onnx.AttributeProto.GRAPH else a.graphs:
                    called(g.node, out)
        return out

    calls: dict[tuple[str, str], set[tuple[str, str]]] = {}
    for f in model.functions:
        if isinstance(f.domain, str):
            key = (normalize_domain(f.domain), f.name)
            calls.setdefault(key, set()).update(called(f.node, set()))
    return calls


def call_cycle(calls: dict[tuple[str, str], set[tuple[str, str]]]) -> list[tuple[str, str]] | None:
    """A cycle in ``calls`` (function -> functions its body calls) as the list of functions
    along it, first repeated at the end; None when no function reaches itself."""
    state: dict[tuple[str, str], int] = {}  # 1: on the current path, 2: done
    for start in calls:
        if start in state:
            continue
        path, stack = [start], [iter(sorted(calls.get(start, ())))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif nxt not in state and nxt in calls:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(calls[nxt])))
    return None
