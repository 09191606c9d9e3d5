"""Initializers a conversion left without readers.

A rewrite may stop reading a constant (a Slice of steps other than 1 written without its
bounds' tensors, a chain folded into one initializer first): the main graph would keep
tensors nothing reads, which runtimes warn about and which keep their weight in the file.
Those that some node read before the conversion and none reads after are dropped, with
their external data references (a graph input or output is never dropped; an initializer
nothing read before is the author's, kept as it is).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx

from opshift.graph.edit import used_names

if TYPE_CHECKING:
    from opshift.graph.facts import Facts


def read_initializers(graph: onnx.GraphProto, facts: Facts | None = None) -> set[str]:
    """The initializers of ``graph`` that its nodes (or their subgraphs) read; ``facts``:
    the :class:`~opshift.graph.facts.Facts` of the model ``graph`` is the main graph of,
    which knows them (:meth:`~opshift.graph.facts.Facts.main_reads`)."""
    if not graph.initializer:
        return set()
    return {t.name for t in graph.initializer} & (
        used_names(graph.node) if facts is None else facts.main_reads())


def drop_orphaned_initializers(graph: onnx.GraphProto, read_before: set[str]) -> list[str]:
    """Drop the initializers of ``read_before`` that nothing in ``graph`` reads any more and
    that are neither a graph input nor a graph output (and their value infos); return their
    names, in initializer order."""
    if not read_before:
        return []
    keep = used_names(graph.node)
    keep.update(v.name for v in graph.input)
    keep.update(v.name for v in graph.output)
    dead = [t.name for t in graph.initializer if t.name in read_before and t.name not in keep]
    if not dead:
        return []
    gone = set(dead)
    for field in ("initializer", "value_info"):
        _drop(graph, field, gone)
    return dead


def _drop(graph: onnx.GraphProto, field: str, gone: set[str]) -> None:
    """Drop the entries of repeated ``field`` named in ``gone``: the field rebuilt, not
    deleted from one by one (a model may drop thousands of a million)."""
    entries = getattr(graph, field)
    kept = [e for e in entries if e.name not in gone]
    if len(kept) != len(entries):
        new = onnx.GraphProto()
        getattr(new, field).extend(kept)
        graph.ClearField(field)
        getattr(graph, field).MergeFrom(getattr(new, field))
