"""Op counts of a model (:func:`op_counts`): what inspect reports, and what every rewriting
command prints before and after. Apart from :mod:`opshift.inspect.report`, which those
commands do not otherwise import."""

from __future__ import annotations

from collections import Counter

import onnx

__all__ = ["op_counts"]

_GRAPH, _GRAPHS = onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS
#: default-domain ops with graph attributes (other domains' nodes are all looked at)
_CONTROL = frozenset({"If", "Loop", "Scan", "SequenceMap"})


def op_counts(model: onnx.ModelProto) -> dict[str, int]:
    """Op type -> nodes, over the main graph, its subgraphs and model-local functions;
    ``domain::Op`` for ops outside ai.onnx. Most frequent first."""
    kinds: Counter[tuple[str, str]] = Counter()

    def nodes(ns) -> None:
        here = Counter((n.domain, n.op_type) for n in ns)  # one C-speed count per list
        kinds.update(here)
        holders = {k for k in here if k[0] not in ("", "ai.onnx") or k[1] in _CONTROL}
        ops = {op for _, op in holders}
        for n in ns if holders else ():
            if n.op_type in ops and (n.domain, n.op_type) in holders:
                for a in n.attribute:
                    if a.type == _GRAPH:
                        nodes(a.g.node)
                    elif a.type == _GRAPHS:
                        for g in a.graphs:
                            nodes(g.node)

    nodes(model.graph.node)
    for f in model.functions:
        nodes(f.node)
    counts: Counter[str] = Counter()
    for (domain, op), k in kinds.items():
        counts[op if domain in ("", "ai.onnx") else f"{domain}::{op}"] += k
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
