"""When a graph that runs once reads each value for the last time, so that the runtime drops
it then: a model's activations are not all held until the end of its run."""

from __future__ import annotations

import onnx

from opshift.graph.scopes import subgraphs

#: Nodes below which a graph keeps its values to its end: verify's region checks run many
#: graphs of a few nodes and small values, where finding the last reads costs, not saves.
FEW = 16


def last_reads(graph: onnx.GraphProto) -> tuple[list, dict[int, list[str]]]:
    """(each node's input names, node index -> the names that node reads for the last time:
    its inputs and, for a node with subgraphs, the outer names they read). The graph's
    outputs are never listed. The runtime reads the input names from here rather than from
    each node again. A graph of fewer than :data:`FEW` nodes: (None per node, no drops)."""
    if len(graph.node) < FEW:
        return [None] * len(graph.node), {}
    last: dict[str, int] = {}
    names = []
    for i, node in enumerate(graph.node):
        ins = node.input[:]
        names.append(ins)
        for name in ins:
            last[name] = i
        for _, g in subgraphs(node):
            for name in _outer_reads(g):
                last[name] = i
    for vi in graph.output:
        last.pop(vi.name, None)
    last.pop("", None)
    by_node: dict[int, list[str]] = {}
    for name, i in last.items():
        by_node.setdefault(i, []).append(name)
    return names, by_node


def _outer_reads(graph: onnx.GraphProto) -> set[str]:
    """The names ``graph`` (and the graphs inside it) reads that it does not define."""
    defined = {vi.name for vi in graph.input} | {t.name for t in graph.initializer}
    read: set[str] = set()
    for node in graph.node:
        read.update(node.input)
        for _, g in subgraphs(node):
            read |= _outer_reads(g)
        defined.update(node.output)
    read.update(vi.name for vi in graph.output)
    return read - defined
