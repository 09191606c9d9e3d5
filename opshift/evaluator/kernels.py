"""Where the evaluator's kernel for each (op, version) comes from: opshift's own registry
first, else onnx.reference (see :mod:`opshift.evaluator.onnx_reference`)."""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx

from .. import opsets
from ..errors import where
from . import onnx_reference, registry

OPSHIFT = "opshift"
ONNX_REFERENCE = onnx_reference.SOURCE


def source(domain: str, op: str, version: int) -> str | None:
    """``"opshift"``, ``"onnx.reference"``, or None when neither has a kernel for ``op`` at
    schema ``version``."""
    registry._load_all()
    if registry.lookup(domain, op, version) is not None:
        return OPSHIFT
    return ONNX_REFERENCE if onnx_reference.refusal(domain, op, version) is None else None


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
    from ..graph.scopes import iter_scopes

    table = KernelTable()
    local = {(opsets.normalize_domain(f.domain), f.name) for f in model.functions}
    registry._load_all()
    for sc in iter_scopes(model):
        for node in sc.nodes:
            domain = opsets.normalize_domain(node.domain)
            if (domain, node.op_type) in local:
                continue
            version, why = _version_and_refusal(node, domain, sc.opsets)
            if why is None:
                table.sources[label(domain, node.op_type, version)] = (
                    OPSHIFT if registry.lookup(domain, node.op_type, version) else ONNX_REFERENCE)
            elif table.missing is None:
                table.missing = (f"{where(node, version=version, domain=domain)} in "
                                 f"{sc.label}: {why}")
    return table


def _version_and_refusal(node: onnx.NodeProto, domain: str, scope_opsets
                         ) -> tuple[int | None, str | None]:
    """The schema version in force for ``node`` and why it has no kernel (None: it has)."""
    opset = scope_opsets.get(domain)
    if opset is None:
        return None, f"no opset import for domain {domain or 'ai.onnx'!r}"
    s = opsets.schema(node.op_type, opset, domain)
    if s is None:
        return None, f"no such op at opset {opset}"
    v = s.since_version
    if registry.lookup(domain, node.op_type, v) is not None:
        return v, None
    return v, onnx_reference.refusal(domain, node.op_type, v)


def every_op() -> dict[tuple[str, str], dict[int, str | None]]:
    """(domain, op) -> {schema version: where its kernel comes from, None if nowhere} for
    every op version onnx.defs knows in the domains the evaluator runs."""
    out: dict[tuple[str, str], dict[int, str | None]] = {}
    for s in onnx.defs.get_all_schemas_with_history():
        d = opsets.normalize_domain(s.domain)
        if d in onnx_reference.DOMAINS:
            out.setdefault((d, s.name), {})[s.since_version] = source(d, s.name, s.since_version)
    return {k: dict(sorted(out[k].items())) for k in sorted(out)}
