"""Templates bound for one node, and the structural check's index.

A bound template is checked against the same nodes built one by one (names, taken names,
non-ASCII); the index replaces inline's own walk, so both must give the same model.
"""

from __future__ import annotations

import onnx
import pytest
from conftest import MODELS, bundled_at_every_opset, make_model
from onnx import TensorProto as TP
from onnx import helper

from opshift.check import structure
from opshift.graph.facts import Facts
from opshift.graph.names import Names
from opshift.graph.scopes import node_kinds, subgraphs
from opshift.inline import templates as dec
from opshift.inline.inliner import inline_proto
from opshift.opsets import normalize_domain

BUNDLED = sorted(p.stem for p in MODELS.glob("*.onnx"))


def reference_nodes(template: dec.Template, x: str, y: str, s: str | None,
                    base: str, used: set[str]) -> list[onnx.NodeProto]:
    """What binding a template must give, node by node: internal values named
    ``<base>/<Suffix>`` (``_k`` when taken) in order of first appearance, then the last
    node's name ``<base>/Y``; every other node named as its output."""
    names = Names.from_used(used)
    bind = {"$X": x, "$Y": y, "$S": s, "": ""}
    for t in template:
        o = t.output[0]
        if o not in bind:
            bind[o] = names.fresh(f"{base}/{o[1:]}")
    yname = names.fresh(f"{base}/Y")
    out = []
    for t in template:
        n = onnx.NodeProto()
        n.CopyFrom(t)
        n.input[:] = [bind[v] for v in t.input]
        n.output[:] = [bind[t.output[0]]]
        n.name = yname if t.output[0] == "$Y" else bind[t.output[0]]
        out.append(n)
    return out


TEMPLATES = [
    ("PRelu-fn", dec.function_template("PRelu", ())),
    ("LeakyRelu-fn", dec.function_template("LeakyRelu", (("alpha", 0.25),))),
    ("Selu-fn", dec.function_template("Selu", (("alpha", 1.5), ("gamma", 2.0)))),
    ("Selu-static", dec.static_template("Selu", (("alpha", 1.5), ("gamma", 2.0)), TP.DOUBLE)),
    ("PRelu-legacy", dec.legacy_leaky_template("sub", None, TP.FLOAT, 6, 1, True, "Slope")),
    ("Selu-legacy", dec.legacy_selu_template(1.5, 2.0, TP.FLOAT16, 5)),
]


@pytest.mark.parametrize("label,template", TEMPLATES, ids=[t[0] for t in TEMPLATES])
@pytest.mark.parametrize("x,base", [
    ("x", "act"),
    ("ä/x:0", "节点/act"),  # non-ASCII
    ("a%b%%s", "n%s%%"),
])
@pytest.mark.parametrize("taken", ["none", "all", "first"])
def test_instantiate_binds_placeholders_and_fresh_names(label, template, x, base, taken):
    used = {x, "y", "s"}
    if taken == "all":  # every name the node would get is taken once: all become _1
        used |= {f"{base}/{t.output[0][1:]}" for t in template} | {f"{base}/Y"}
    elif taken == "first":  # only the first: it alone becomes _1
        used.add(f"{base}/{template[0].output[0][1:]}")
    want = reference_nodes(template, x, "y", "s", base, set(used))
    names = Names.from_used(set(used))
    got = dec.instantiate(template, x, "y", base, names, "s")
    assert got == want
    assert b"".join(n.SerializeToString() for n in got) == \
        b"".join(n.SerializeToString() for n in want)
    # every name the node took is now in use
    taken_now = {n.output[0] for n in want if n.output[0] != "y"} | {want[-1].name}
    assert all(n in names for n in taken_now)
    # and a second node with the same base gets names of its own
    again = dec.instantiate(template, x, "y", base, names, "s")
    assert not {n.name for n in again} & {n.name for n in got}


def reference_walk(model: onnx.ModelProto) -> tuple[list[tuple[str, list]], set[str]]:
    """What inline needs of a model, by a walk of its own (an oracle for the index): every
    scope in pre-order with its PRelu/LeakyRelu/Selu nodes as (index, node, op, name,
    inputs, outputs), and every name in use."""
    used: set[str] = set()
    scopes: list[tuple[str, list]] = []

    def graph(g: onnx.GraphProto, label: str) -> None:
        used.update(v.name for v in g.input)
        used.update(v.name for v in g.output)
        used.update(t.name for t in g.initializer)
        nodes(g.node, label)

    def nodes(ns, label: str) -> None:
        sites: list = []
        scopes.append((label, sites))
        for i, n in enumerate(ns):
            used.add(n.name)
            used.update(n.output)
            if n.op_type in dec.OPS and normalize_domain(n.domain) == "":
                sites.append((i, n, n.op_type, n.name, n.input[:], n.output[:]))
            for attr, sg in subgraphs(n):
                graph(sg, f"{label}/node {n.name!r}/{attr}")

    graph(model.graph, f"graph {model.graph.name!r}")
    for f in model.functions:
        used.update(f.input)
        used.update(f.output)
        nodes(f.node, f"function {f.domain + '::' if f.domain else ''}{f.name}")
    used.discard("")
    return scopes, used


@pytest.mark.parametrize("name", BUNDLED)
def test_index_names_and_sites_match_an_independent_walk(name):
    for opset, m in bundled_at_every_opset(name):
        index = structure.ModelIndex()
        structure.check(m, name, index=index)
        scopes, used = reference_walk(m)
        assert index.names == used, (name, opset)
        assert [sc.label for sc in index.scopes] == [label for label, _ in scopes]
        assert [sc.sites for sc in index.scopes] == [sites for _, sites in scopes]
        light = structure.ModelIndex(full=False)  # the node kinds fuse reads: in both modes
        structure.check(m, name, index=light)
        assert index.kinds == light.kinds == node_kinds(m), (name, opset)
        # Facts answers from the walk's index what it finds without one
        assert Facts(m, index=light).kinds() is light.kinds
        assert Facts(m, index=index).kinds() == Facts(m).kinds() == node_kinds(m)
        shared = Facts(m, index=index).names._used
        assert shared is index.names and shared == Facts(m).names._used, (name, opset)


@pytest.mark.parametrize("name", BUNDLED)
def test_inline_with_index_is_the_same_model(name):
    """The CLI's path (the index of the structural check) gives byte for byte the model of
    the API's (its own walk)."""
    for opset, m in bundled_at_every_opset(name):
        a, b = onnx.ModelProto(), onnx.ModelProto()
        a.CopyFrom(m)
        b.CopyFrom(m)
        try:
            ra = inline_proto(a)
        except Exception as e:  # refusals must be the same too
            index = structure.ModelIndex()
            structure.check(b, name, index=index)
            with pytest.raises(type(e), match=None):
                inline_proto(b, index=index)
            continue
        index = structure.ModelIndex()
        structure.check(b, name, index=index)
        rb = inline_proto(b, index=index)
        assert a.SerializeToString() == b.SerializeToString(), (name, opset)
        assert [(n.label, n.op, n.scope, n.after) for n in ra.nodes] == \
            [(n.label, n.op, n.scope, n.after) for n in rb.nodes]


def test_index_covers_subgraphs_functions_and_every_kind_of_name():
    """Names only a subgraph, a function or a node name holds are in use, and the new
    names avoid them."""
    f = helper.make_function("dom", "F", ["fx"], ["fy"],
                             [helper.make_node("Selu", ["fx"], ["sel/Y"], name="fsel"),
                              helper.make_node("Identity", ["sel/Y"], ["fy"])],
                             [helper.make_opsetid("", 18)])
    then = helper.make_graph([helper.make_node("LeakyRelu", ["x"], ["t"], name="lr")], "then",
                             [], [helper.make_tensor_value_info("t", TP.FLOAT, [4])])
    els = helper.make_graph([helper.make_node("Identity", ["x"], ["sel/ZeroCast"],
                                              name="lr/Y")], "else", [],
                            [helper.make_tensor_value_info("sel/ZeroCast", TP.FLOAT, [4])])
    nodes = [helper.make_node("If", ["c"], ["i"], name="if", then_branch=then, else_branch=els),
             helper.make_node("Selu", ["i"], ["s"], name="sel"),
             helper.make_node("F", ["s"], ["y"], domain="dom", name="call")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [4]),
                           helper.make_tensor_value_info("c", TP.BOOL, [])],
                   [helper.make_tensor_value_info("y", TP.FLOAT, [4])], opset=18,
                   functions=[f], extra_opsets=[helper.make_opsetid("dom", 1)])
    index = structure.ModelIndex()
    structure.check(m, "m", index=index)
    assert {"sel/Y", "sel/ZeroCast", "lr/Y", "fx", "fy", "t"} <= index.names
    assert [sc.label for sc in index.scopes] == [
        "graph 'g'", "graph 'g'/node 'if'/else_branch", "graph 'g'/node 'if'/then_branch",
        "function dom::F"]
    # a subgraph's and a function's nodes too (LeakyRelu is only in the then branch)
    assert index.kinds == {("", "If"), ("", "Selu"), ("dom", "F"), ("", "LeakyRelu"),
                            ("", "Identity")}
    inline_proto(m, index=index)
    onnx.checker.check_model(m, full_check=True)
    outs = [o for n in m.graph.node for o in n.output]
    assert "sel/ZeroCast_1" in outs and "sel/Y_1" in [n.name for n in m.graph.node]
    then_nodes = next(a.g.node for a in m.graph.node[0].attribute if a.name == "then_branch")
    assert then_nodes[-1].name == "lr/Y_1"
    index.forget_reading()  # the model was rewritten: what described it goes, flags stay
    assert (index.names, index.scopes, index.types) == (set(), [], {})
    assert ("dom", "F") in index.kinds


def test_inline_keeps_every_model_field():
    """Fields around the graph (metadata, doc strings, functions, initializers, value_info)
    survive, and subgraphs are edited too."""
    then = helper.make_graph([helper.make_node("LeakyRelu", ["x"], ["t"], name="lr")], "then",
                             [], [helper.make_tensor_value_info("t", TP.FLOAT, [4])])
    els = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "else", [],
                            [helper.make_tensor_value_info("e", TP.FLOAT, [4])])
    nodes = [helper.make_node("Selu", ["x"], ["s"], name="sel"),
             helper.make_node("If", ["c"], ["i"], name="if", then_branch=then, else_branch=els),
             helper.make_node("PRelu", ["i", "slope"], ["y"], name="pr")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [4]),
                           helper.make_tensor_value_info("c", TP.BOOL, [])],
                   [helper.make_tensor_value_info("y", TP.FLOAT, [4])], opset=13,
                   initializers=[helper.make_tensor("slope", TP.FLOAT, [1], [0.5])])
    m.doc_string = "d" * 300
    m.producer_name = "p"
    m.graph.value_info.append(helper.make_tensor_value_info("s", TP.FLOAT, [4]))
    helper.set_model_props(m, {"k": "v"})
    before = onnx.ModelProto()
    before.CopyFrom(m)
    inline_proto(m)
    back = onnx.ModelProto.FromString(m.SerializeToString())
    assert back.doc_string == "d" * 300 and back.metadata_props[0].value == "v"
    assert back.producer_name == "p" and back.graph.value_info == before.graph.value_info
    assert back.graph.initializer == before.graph.initializer
    onnx.checker.check_model(back, full_check=True)
    assert {n.op_type for n in back.graph.node}.isdisjoint({"Selu", "PRelu"})
    if_node = next(n for n in back.graph.node if n.op_type == "If")
    then = next(a.g for a in if_node.attribute if a.name == "then_branch")
    assert "LeakyRelu" not in {n.op_type for n in then.node}


def _external(t: onnx.TensorProto) -> onnx.TensorProto:
    t.ClearField("raw_data")
    t.data_location = TP.EXTERNAL
    for k, v in (("location", "w.bin"), ("offset", "0"), ("length", "4")):
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


@pytest.mark.parametrize("where_", ["initializer", "constant", "subgraph", "function", "none"])
def test_index_finds_external_data_where_modelio_does(where_):
    from opshift.io import models as modelio

    w = _external(helper.make_tensor("w", TP.FLOAT, [1], [1.0]))
    const = helper.make_node("Constant", [], ["k"], value=w)
    body = [helper.make_node("Constant", [], ["sk"], value=w),
            helper.make_node("Add", ["x", "sk" if where_ == "subgraph" else "k"], ["t"])]
    then = helper.make_graph(body if where_ == "subgraph" else body[1:], "then", [],
                             [helper.make_tensor_value_info("t", TP.FLOAT, [1])])
    f = helper.make_function("dom", "F", ["fx"], ["fy"], [
        helper.make_node("Constant", [], ["fk"], value=w if where_ == "function" else
                         helper.make_tensor("fw", TP.FLOAT, [1], [1.0])),
        helper.make_node("Add", ["fx", "fk"], ["fy"])], [helper.make_opsetid("", 13)])
    nodes = [*([const] if where_ == "constant" else
               [helper.make_node("Identity", ["x"], ["k"])]),
             helper.make_node("If", ["c"], ["i"], then_branch=then, else_branch=then),
             helper.make_node("F", ["i"], ["y"], domain="dom")]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TP.FLOAT, [1]),
                           helper.make_tensor_value_info("c", TP.BOOL, [])],
                   [helper.make_tensor_value_info("y", TP.FLOAT, [1])], opset=13,
                   functions=[f], extra_opsets=[helper.make_opsetid("dom", 1)],
                   initializers=[w] if where_ == "initializer" else [])
    index, light = structure.ModelIndex(), structure.ModelIndex(full=False)
    structure.check(m, "m", index=index)
    structure.check(m, "m", index=light)  # what open_checked uses without a index
    assert index.external == light.external == modelio.has_external_data(m) == \
        (where_ != "none")
    assert not light.names and not light.scopes and not light.types


@pytest.mark.parametrize("name", BUNDLED)
def test_index_types_agree_with_forward_propagation(name):
    """Below opset 15 the index's walk propagates element types (the one Propagation); every
    type it gives is the one inline's whole-model propagation gives, and it types every
    activation's X in the bundled models but an element taken out of a sequence (tensor
    types only: inline asks shape inference for that one)."""

    for opset, m in bundled_at_every_opset(name):
        if opset >= 15:
            continue
        index = structure.ModelIndex()
        structure.check(m, name, index=index)
        forward = Facts(m)
        for v, t in index.types.items():
            assert t == forward.elem_type(v), (name, opset, v)
        from_sequences = {n.output[0] for sc in index.scopes for n in sc.owner.node
                          if n.op_type == "SequenceAt"}
        for sc in index.scopes:
            if sc.function is None:
                for _, n, *_ in sc.sites:
                    if n.input[0] in from_sequences:
                        assert forward.elem_type(n.input[0]) == onnx.TensorProto.FLOAT
                        continue
                    assert index.types.get(n.input[0]) == forward.elem_type(n.input[0]) != 0


def test_index_types_through_constants_casts_and_where():
    nodes = [helper.make_node("Constant", [], ["k"], value=helper.make_tensor(
                 "k", TP.DOUBLE, [1], [2.0])),
             helper.make_node("Cast", ["x"], ["c"], to=TP.FLOAT16),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("Less", ["r", "r"], ["b"]),
             helper.make_node("Where", ["b", "k", "k"], ["w"]),
             helper.make_node("Shape", ["w"], ["s"]),
             helper.make_node("Cast", ["s"], ["y"], to=TP.FLOAT)]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TP.INT32, [2])],
                   [helper.make_tensor_value_info("y", TP.FLOAT, [1])], opset=13)
    index = structure.ModelIndex()
    structure.check(m, "m", index=index)
    assert index.types == {"x": TP.INT32, "k": TP.DOUBLE, "c": TP.FLOAT16, "r": TP.FLOAT16,
                            "b": TP.BOOL, "w": TP.DOUBLE, "s": TP.INT64, "y": TP.FLOAT}
    m18 = make_model(nodes, [helper.make_tensor_value_info("x", TP.INT32, [2])],
                     [helper.make_tensor_value_info("y", TP.FLOAT, [1])], opset=18)
    index = structure.ModelIndex()
    structure.check(m18, "m", index=index)
    assert index.types == {}  # the function band needs no types


def test_declared_types_read_from_the_header_as_from_the_entries():
    """The check hands the types it read (serialized, per list) to the propagation: the same
    types as reading every entry, a later list's type winning, an entry of no element type or
    no tensor type leaving an earlier one, initializers last."""
    from opshift.check.wellformed import read_header
    from opshift.graph.element_types import Propagation

    seq = helper.make_tensor_sequence_value_info("a", TP.FLOAT, [2])
    g = helper.make_graph(
        [], "g",
        [helper.make_tensor_value_info("a", TP.INT32, [2]),
         helper.make_tensor_value_info("b", TP.FLOAT16, None),
         helper.make_tensor_value_info("w", TP.FLOAT, [3])],
        [helper.make_tensor_value_info("b", TP.UNDEFINED, [2]),
         helper.make_tensor_value_info("c", TP.DOUBLE, [])],
        initializer=[helper.make_tensor("w", TP.INT64, [1], [1])],
        value_info=[seq, helper.make_tensor_value_info("c", TP.BFLOAT16, [1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    read, given = {}, {}
    Propagation(m, 9).declare(g, read)
    Propagation(m, 9).declare(g, given, read_header(g, "g").declared())
    assert given == read == {"a": TP.INT32, "b": TP.FLOAT16, "c": TP.BFLOAT16, "w": TP.INT64}


@pytest.mark.parametrize("functions", [None, "all"])
@pytest.mark.parametrize("ops", ["PRelu,LeakyRelu,Selu", "none", "Selu"])
def test_cli_output_equals_the_api(tmp_path, functions, ops):
    """The CLI's file is the API's model byte for byte, with functions inlined first or not,
    and ops selected."""
    from opshift.cli import main
    from opshift.inline import inline

    src = MODELS / "local_function.onnx"
    out = tmp_path / "o.onnx"
    argv = ["inline", str(src), "-o", str(out), "-q", "--ops", ops]
    if functions:
        argv += ["--functions", functions]
    assert main(argv) == 0
    want = inline(onnx.load(src), ops=ops, functions=functions)
    assert out.read_bytes() == want.SerializeToString()


def test_index_types_follow_the_schemas_and_function_calls():
    """The index is typed by the one propagation Facts uses: an op's output types come from
    its schema (ArgMax gives int64, which no list of same-type ops says), a call of a
    model-local function is typed through its body once per tuple of input types, and Facts
    given the index's types answers from them without a walk of its own."""

    body = [helper.make_node("Neg", ["a"], ["b"])]
    f = helper.make_function("dom", "F", ["a"], ["b"], body,
                             [helper.make_opsetid("", 13)])
    nodes = [helper.make_node("ArgMax", ["x"], ["i"], axis=0),
             helper.make_node("Cast", ["i"], ["h"], to=TP.FLOAT16),
             helper.make_node("F", ["h"], ["fh"], domain="dom"),
             helper.make_node("F", ["x"], ["fx"], domain="dom"),
             helper.make_node("Relu", ["fx"], ["y"])]
    m = make_model(nodes, [helper.make_tensor_value_info("x", TP.DOUBLE, [2])],
                   [helper.make_tensor_value_info("y", TP.DOUBLE, [1])], opset=13,
                   functions=[f], extra_opsets=[helper.make_opsetid("dom", 1)])
    index = structure.ModelIndex()
    structure.check(m, "m", index=index)
    assert dict(index.types) == {"x": TP.DOUBLE, "i": TP.INT64, "h": TP.FLOAT16,
                                  "fh": TP.FLOAT16, "fx": TP.DOUBLE, "y": TP.DOUBLE}
    assert sorted(ins for ins, _ in index.types.variants[("dom", "F")]) == [
        (TP.FLOAT16,), (TP.DOUBLE,)]
    facts = Facts(m, types=index.types)
    assert facts.propagated() is index.types
    assert Facts(m, index=index).propagated() is index.types  # the index's, by default
    assert facts.function_variants(f) == index.types.variants[("dom", "F")]
    assert facts.body_elem_type(f, "b") is None  # the two calls disagree
    alone = Facts(m)  # its own walk, by the same propagation
    assert alone.propagated() == index.types
    assert alone.function_variants(f) == index.types.variants[("dom", "F")]
