"""Model-local functions inlined with onnx's own inliner
(``onnx.inliner.inline_selected_functions``: renaming, attribute references, nested calls,
calls inside subgraphs); inlined functions no longer called anywhere are removed."""

from __future__ import annotations

import onnx

from opshift.errors import ConversionError, OpshiftError, function_id
from opshift.graph.scopes import node_kinds
from opshift.inline.result import InlineResult
from opshift.opsets import normalize_domain


def inline_functions(model: onnx.ModelProto, functions, result: InlineResult) -> None:
    """Inline the model-local ``functions`` ("all", or names, ``domain::name`` allowed) of
    ``model`` in place, recording them in ``result``; OpshiftError for an unknown name,
    ConversionError for a function importing another opset than the model."""
    local = {(f.domain, f.name): f for f in model.functions}
    if functions == "all" or functions == ["all"]:
        chosen = list(local)
    else:
        if isinstance(functions, str):
            functions = [s for s in functions.split(",") if s.strip()]
        chosen = []
        for name in functions:
            name = name.strip()
            dom, _, fname = name.rpartition("::")
            hits = [k for k in local if k[1] == fname and (not dom or k[0] == dom)]
            if not hits:
                known = ", ".join(function_id(f) for f in model.functions) or "none"
                raise OpshiftError(f"--functions: no model-local function {name!r} "
                                   f"(the model has: {known})")
            chosen.extend(hits)
    if not chosen:
        return
    called = node_kinds(model)
    chosen = [k for k in chosen if k in called]
    if not chosen:
        return
    model_ops = {normalize_domain(i.domain): i.version for i in model.opset_import}
    for k in chosen:
        f = local[k]
        for imp in f.opset_import:
            d = normalize_domain(imp.domain)
            if d in model_ops and model_ops[d] != imp.version:
                raise ConversionError(
                    f"function {function_id(f)!r}: imports opset {imp.version} of "
                    f"{d or 'ai.onnx'!r} but the model imports {model_ops[d]}; inlining "
                    "would change the version of its nodes")
    before = {(f.domain, f.name) for f in model.functions}
    import onnx.inliner

    new = onnx.inliner.inline_selected_functions(model, chosen)
    model.CopyFrom(new)
    result.functions_inlined.extend(function_id(local[k]) for k in chosen)
    # Remove inlined functions that nothing calls any more (the inliner may keep them).
    still = node_kinds(model)
    keep = [f for f in model.functions
            if (f.domain, f.name) not in chosen or (f.domain, f.name) in still]
    if len(keep) != len(model.functions):
        kept = [onnx.FunctionProto() for _ in keep]
        for dst, src in zip(kept, keep):
            dst.CopyFrom(src)
        del model.functions[:]
        model.functions.extend(kept)
    after = {(f.domain, f.name) for f in model.functions}
    result.functions_removed.extend(
        f"{d}::{n}" if d else n for d, n in sorted(before - after))

