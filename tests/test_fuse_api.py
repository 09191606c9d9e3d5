"""fuse: the API (kinds in and out, the pass, function attributes), the rule set inside
onnxscript's rewriter, and the command."""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from fuse_helpers import (
    const,
    model,
    ops,
    same_numbers,
    specials,
)
from onnx import TensorProto as TP
from onnx import helper

from opshift.fuse import fuse
from opshift.fuse.driver import fuse_with_result
from opshift.fuse.rules import rules
from opshift.plugins.onnx_ir import FusePass

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


# -- API -----------------------------------------------------------------------------------


def _leaky_model():
    return model([const("a", 0.2), helper.make_node("Mul", ["x", "a"], ["ax"]),
                  helper.make_node("Max", ["x", "ax"], ["y"])])


def test_fuse_does_not_mutate_and_returns_the_same_kind(tmp_path):
    m = _leaky_model()
    before = m.SerializeToString()
    out = fuse(m)
    assert m.SerializeToString() == before
    assert isinstance(out, onnx.ModelProto) and ops(out) == ["LeakyRelu"]
    irm = ir.serde.deserialize_model(m)
    n_before = len(list(irm.graph))
    out_ir = fuse(irm)
    assert isinstance(out_ir, ir.Model) and len(list(irm.graph)) == n_before
    assert [n.op_type for n in out_ir.graph] == ["LeakyRelu"]
    p = tmp_path / "m.onnx"
    onnx.save(m, p)
    assert ops(fuse(p)) == ["LeakyRelu"]
    # no value_info added by the shape inference fuse runs on its copy
    assert not out.graph.value_info


def test_fuse_pass_modified_is_truthful():
    p = FusePass()
    irm = ir.serde.deserialize_model(_leaky_model())
    assert p(irm).modified
    assert [n.op_type for n in irm.graph] == ["LeakyRelu"]
    assert not FusePass()(irm).modified
    bad = ir.serde.deserialize_model(model([const("a", 1.5),
                                            helper.make_node("Mul", ["x", "a"], ["ax"]),
                                            helper.make_node("Max", ["x", "ax"], ["y"])]))
    p = FusePass()
    assert not p(bad).modified
    assert any("> 1" in e.detail for e in p.last_result.refused)


def test_fuse_pass_fuses_inside_functions_typed_from_call_sites():
    from conftest import MODELS

    from opshift.inline import inline

    m = onnx.load(MODELS / "local_function.onnx")
    inlined = inline(m)  # functions kept; the activations inside them decomposed
    irm = ir.serde.deserialize_model(inlined)
    p = FusePass()
    assert p(irm).modified
    body = [n.op_type for n in next(iter(irm.functions.values()))]
    assert sorted(body) == ["Add", "LeakyRelu", "PRelu", "Selu"], p.last_result.lines()
    leaky = [n for n in next(iter(irm.functions.values())) if n.op_type == "LeakyRelu"][0]
    assert leaky.attributes["alpha"].is_ref()  # LeakyRelu <alpha = @alpha>, as before
    out = ir.serde.serialize_model(irm)
    plain = ir.serde.serialize_model(ir.serde.deserialize_model(inlined))
    # no inferred type written into the model: value_info as onnx_ir writes it anyway
    assert {v.name for v in out.graph.value_info} <= {v.name for v in plain.graph.value_info}
    same_numbers(m, out, {"x": specials(np.float32, (3, 6))})


@pytest.mark.parametrize("gamma_ref", [True, False])
def test_selu_body_with_function_attributes_fuses_to_selu_with_the_references(gamma_ref):
    """A function's ``Selu<alpha=@alpha, gamma=@gamma or a literal>``, inlined, comes back
    with the same references: the body's constants are then attribute references, not
    constants, and the check falls back to reading them as such."""
    from opshift.inline import inline

    selu = helper.make_node("Selu", ["x"], ["y"])
    selu.attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    if gamma_ref:
        selu.attribute.append(helper.make_attribute_ref("gamma", onnx.AttributeProto.FLOAT))
    else:
        selu.attribute.append(helper.make_attribute("gamma", 1.25))
    f = helper.make_function("local", "F", ["x"], ["y"], [selu], [helper.make_opsetid("", 18)],
                             attributes=["alpha", "gamma"] if gamma_ref else ["alpha"])
    call = helper.make_node("F", ["x"], ["y"], domain="local", alpha=0.5,
                            **({"gamma": 2.0} if gamma_ref else {}))
    g = helper.make_graph([call], "g", [helper.make_tensor_value_info("x", TP.FLOAT, [3, 6])],
                          [helper.make_tensor_value_info("y", TP.FLOAT, [3, 6])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18),
                                            helper.make_opsetid("local", 1)], functions=[f])
    inlined = inline(m)  # the function kept, its Selu decomposed
    assert "Selu" not in [n.op_type for n in inlined.functions[0].node]
    out, result = fuse_with_result(inlined)
    (node,) = out.functions[0].node
    got = {a.name: a.ref_attr_name or a.f for a in node.attribute}
    assert (node.op_type, got) == ("Selu", {"alpha": "alpha",
                                            "gamma": "gamma" if gamma_ref else 1.25})
    same_numbers(m, out, {"x": specials(np.float32, (3, 6))})


def test_rules_is_a_rewrite_rule_set():
    from onnxscript.rewriter import RewriteRuleSet

    rs = rules()
    assert isinstance(rs, RewriteRuleSet)
    assert all(r.name for r in rs)


# -- command -------------------------------------------------------------------------------


def test_cli_fuse_verify_verbose_json(tmp_path, capsys):
    from opshift.cli import main

    src = tmp_path / "in.onnx"
    onnx.save(model([const("a", 0.2), helper.make_node("Mul", ["x", "a"], ["ax"]),
                     helper.make_node("Max", ["x", "ax"], ["y"]),
                     const("b", 1.5), helper.make_node("Mul", ["y", "b"], ["yb"]),
                     helper.make_node("Max", ["y", "yb"], ["y2"])], outputs=("y2",)), src)
    out = tmp_path / "out.onnx"
    assert main(["fuse", str(src), "-o", str(out), "--verify", "-v"]) == 0
    text = capsys.readouterr().out
    assert "fused" in text and "-> LeakyRelu" in text
    assert "refused" in text and "> 1" in text
    assert "verify: ok" in text
    assert ops(onnx.load(out)) == ["LeakyRelu", "Mul", "Max"]
    assert main(["fuse", str(src), "-o", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (change,) = data["changes"]
    assert change["what"].startswith("fused into LeakyRelu")
    assert "> 1" in data["details"]["refused"][0]["reason"]


def test_cli_verify_catches_a_wrong_fusion_and_writes_nothing(tmp_path, capsys, monkeypatch):
    from opshift.cli import main
    from opshift.fuse.rules import checks as _checks

    real = _checks.scalar_attr
    monkeypatch.setattr(_checks, "scalar_attr", lambda *a, **k: real(*a, **k) * 1.5)
    src = tmp_path / "in.onnx"
    onnx.save(_leaky_model(), src)
    out = tmp_path / "out.onnx"
    assert main(["fuse", str(src), "-o", str(out), "--verify"]) == 1
    assert not out.exists()
    text, err = capsys.readouterr()
    assert "FAIL" in text and "nothing written" in err


def _pattern_text(pattern) -> str:
    """``str(pattern)`` with anonymous values numbered by first appearance, not by id."""
    import re

    ids: dict[str, str] = {}
    return re.sub(r":(\d+)", lambda m: ":" + ids.setdefault(m.group(1), str(len(ids))),
                  str(pattern))


def test_rules_commute_lazily_and_their_filters_hold_for_every_operand_order():
    """A rule's op set and its root's input-op multiset come from the pattern as written;
    every commuted variant has the same. Variants are listed only when first needed, and
    each is built only when a node first fits it -- the same patterns, in the same order, as
    onnxscript's ``GraphPattern.commute`` builds all at once."""
    from opshift.fuse.report import skeleton, skeleton_ops
    from opshift.fuse.rules.casts import CAST_RULES

    cast_rules = {c.__name__ for c in CAST_RULES}

    for rule in [*rules().rules, *rules(allow_rounding=True).rules]:
        assert rule._commuted is None, rule.name
        ops = skeleton_ops(rule)
        variants = rule._variants
        if rule.name not in cast_rules:  # (those match Cast(op(x)): nothing to commute)
            assert len(variants) >= 2, rule.name  # Add/Mul/Max/Min operands commuted
        assert all(built is None for _, _, built in variants), rule.name
        reference = rule._target_pattern.commute()
        assert len(variants) == len(reference), rule.name
        for entry, want in zip(variants, reference):
            skel = entry[0]
            assert skel == skeleton(want.output_node), rule.name
            assert _pattern_text(rule._variant_rule(entry)._target_pattern) == \
                _pattern_text(want), rule.name
            todo, seen = [skel], set()
            while todo:
                op, children = todo.pop()
                seen.add(op)
                todo.extend(child for _, child in children)
            assert seen == ops, rule.name
            assert Counter(child[0] for _, child in skel[1]) == dict(rule._needs), rule.name
        assert rule._variants is variants  # listed once
        assert rule._variant_rule(variants[-1]) is variants[-1][2]  # built once


@pytest.mark.parametrize("allow_rounding", [False, True])
def test_every_rule_needs_an_anchor_op(allow_rounding):
    """fuse skips a model with no Mul and no Cast without building the rules: every rule's
    pattern must hold one of them, in every operand order."""
    from opshift.fuse.anchors import ANCHORS, may_hold_patterns
    from opshift.fuse.engine import rule_ops

    needs = rule_ops(allow_rounding)
    assert len(needs) == len(rules(allow_rounding=allow_rounding).rules)
    for need in needs:
        assert need & ANCHORS, sorted(need)
        assert may_hold_patterns(need)
    assert not may_hold_patterns({"Conv", "PRelu", "LeakyRelu", "Selu", "Relu", "Exp"})
