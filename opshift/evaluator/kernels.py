"""Where the evaluator's kernel for each (op, version) comes from: opshift's own registry
first, else the version's function body when its schema has one (see
:mod:`opshift.evaluator.function_body`), else onnx.reference (see
:mod:`opshift.evaluator.onnx_reference`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import onnx

from opshift import opsets
from opshift.errors import where
from opshift.evaluator import function_body, onnx_reference, registry

OPSHIFT = "opshift"
ONNX_REFERENCE = onnx_reference.SOURCE
FUNCTION_BODY = function_body.SOURCE


def choose(domain: str, op: str, version: int) -> tuple[Any, str | None, str | None]:
    """(kernel, its source, None), or (None, None, why there is none) for ``op`` at schema
    ``version``."""
    registry.load_all()
    impl = registry.lookup(domain, op, version)
    if impl is not None:
        return impl, OPSHIFT, None
    random = domain == "" and op in onnx_reference.RANDOM  # a body drawing random values
    if function_body.has_body(domain, op, version) and not random:
        return function_body.run, FUNCTION_BODY, None
    why = onnx_reference.refusal(domain, op, version)
    if why:
        return None, None, why
    return onnx_reference.run, ONNX_REFERENCE, None


def source(domain: str, op: str, version: int) -> str | None:
    """``"opshift"``, ``"function body"``, ``"onnx.reference"``, or None when there is no
    kernel for ``op`` at schema ``version``."""
    return choose(domain, op, version)[1]


def label(domain: str, op: str, version: int) -> str:
    """``Op-version``, with ``domain::`` before it outside the default domain."""
    return f"{domain + '::' if domain else ''}{op}-{version}"


@dataclass
class KernelTable:
    """The kernels a model needs: ``sources`` maps each (op, version) label to where its
    kernel comes from; ``missing`` is a reason naming the first node that has none."""

    sources: dict[str, str] = field(default_factory=dict)
    missing: str | None = None


def kernels(model: onnx.ModelProto) -> KernelTable:
    """Every node of ``model`` (graph, subgraphs, model-local functions) at the schema
    version in force where it is; model-local function calls need no kernel."""
    from opshift.graph.scopes import iter_scopes

    table = KernelTable()
    local = {(opsets.normalize_domain(f.domain), f.name) for f in model.functions}
    registry.load_all()
    scopes = list(iter_scopes(model))
    missing = False
    for sc in scopes:  # one lookup per kind of node in a scope
        for op, dom in sc.kinds:
            domain = opsets.normalize_domain(dom)
            if (domain, op) in local:
                continue
            version, src, why = _version_and_source(op, domain, sc.opsets)
            if why is None:
                table.sources[label(domain, op, version)] = src
            else:
                missing = True
    if missing:  # named by the first such node in graph order (kinds come in no order)
        table.missing = _first_missing(scopes, local)
    return table


def _first_missing(scopes: list, local: set[tuple[str, str]]) -> str:
    """Where the first node in graph order without a kernel is, and why it has none."""
    for sc in scopes:
        for node in sc.nodes:
            domain = opsets.normalize_domain(node.domain)
            if (domain, node.op_type) in local:
                continue
            version, _, why = _version_and_source(node.op_type, domain, sc.opsets)
            if why is not None:
                return f"{where(node, version=version, domain=domain)} in {sc.label}: {why}"
    raise AssertionError("a kernel is missing, but no node lacks one")


def _version_and_source(op: str, domain: str, scope_opsets
                        ) -> tuple[int | None, str | None, str | None]:
    """The schema version in force for ``op`` of ``domain``, where its kernel comes from,
    and why it has none (None: it has)."""
    opset = scope_opsets.get(domain)
    if opset is None:
        return None, None, f"no opset import for domain {domain or 'ai.onnx'!r}"
    s = opsets.schema(op, opset, domain)
    if s is None:
        return None, None, f"no such op at opset {opset}"
    v = s.since_version
    _, src, why = choose(domain, op, v)
    return v, src, why


def every_op() -> dict[tuple[str, str], dict[int, str | None]]:
    """(domain, op) -> {schema version: where its kernel comes from, None if nowhere} for
    every op version onnx.defs knows in the domains the evaluator runs."""
    out: dict[tuple[str, str], dict[int, str | None]] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        d = opsets.normalize_domain(s.domain)
        if d in onnx_reference.DOMAINS:
            out.setdefault((d, s.name), {})[s.since_version] = source(d, s.name, s.since_version)
    return {k: dict(sorted(out[k].items())) for k in sorted(out)}
