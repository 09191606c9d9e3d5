"""Node lists edited in place (opshift.graph.scopes.arrange / splice): the kept nodes are
moved (the same messages, as the wrappers a caller holds see), new ones copied in, left-out
ones deleted, and nothing before ``start`` touched."""

from __future__ import annotations

import onnx
from onnx import helper

from opshift.graph.scopes import arrange, splice


def _nodes(n: int):
    g = helper.make_graph([helper.make_node("Relu", [f"x{i}"], [f"x{i + 1}"], name=f"n{i}")
                           for i in range(n)], "g", [], [])
    m = onnx.load_from_string(helper.make_model(g).SerializeToString())
    return m, m.graph.node


def names(nodes) -> list[str]:
    return [n.name for n in nodes]


def test_arrange_moves_kept_nodes_copies_new_ones_and_deletes_the_rest():
    m, nodes = _nodes(6)
    held = list(nodes)
    new = helper.make_node("Identity", ["a"], ["b"], name="new")
    arrange(nodes, [held[3], new, held[0], held[5], held[1]])
    assert names(nodes) == ["n3", "new", "n0", "n5", "n1"]
    held[5].name = "renamed"  # the same message, moved: the caller's wrapper still edits it
    assert names(m.graph.node) == ["n3", "new", "n0", "renamed", "n1"]
    new.name = "changed"  # a node from elsewhere is copied in
    assert nodes[1].name == "new"


def test_arrange_copies_a_node_listed_twice():
    _, nodes = _nodes(2)
    held = list(nodes)
    arrange(nodes, [held[1], held[0], held[1]])
    assert names(nodes) == ["n1", "n0", "n1"]
    nodes[0].name = "first"
    assert names(nodes) == ["first", "n0", "n1"]


def test_arrange_leaves_the_nodes_before_start():
    _, nodes = _nodes(5)
    held = list(nodes)
    arrange(nodes, [held[4], held[2]], start=2)
    assert names(nodes) == ["n0", "n1", "n4", "n2"]


def test_splice_replaces_deletes_and_inserts_in_order():
    _, nodes = _nodes(6)
    held = list(nodes)
    pre = helper.make_node("Unsqueeze", ["s"], ["t"], name="pre")
    splice(nodes, {1: [], 3: [pre, held[3]], 5: [helper.make_node("Neg", ["a"], ["b"],
                                                                   name="neg")]})
    assert names(nodes) == ["n0", "n2", "pre", "n3", "n4", "neg"]
    held[3].input[0] = "t"  # kept in place: not a copy
    assert nodes[3].input[0] == "t"


def test_splice_of_nothing_changes_nothing():
    m, nodes = _nodes(3)
    before = m.SerializeToString()
    splice(nodes, {})
    assert m.SerializeToString() == before
