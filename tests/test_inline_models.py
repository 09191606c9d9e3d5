"""inline on every bundled model, at its own opset and converted to every opset 1..newest:
primitives only, checker full_check at that opset, the same numbers as before inlining."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import MODELS, bundled, bundled_at_every_opset

from opshift import evaluate
from opshift.inline.inliner import inline_proto
from opshift.verify import compare

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ACTS = {"PRelu", "LeakyRelu", "Selu"}
NAMES = sorted(p.stem for p in MODELS.glob("*.onnx"))


def _load(name: str):
    m, feeds, _ = bundled(name)
    return m, feeds


def _ops(m: onnx.ModelProto) -> set[str]:
    seen: set[str] = set()

    def nodes(ns):
        for n in ns:
            seen.add(n.op_type)
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    nodes(a.g.node)
                for g in a.graphs:
                    nodes(g.node)

    nodes(m.graph.node)
    for f in m.functions:
        nodes(f.node)
    return seen


def _check(m: onnx.ModelProto, feeds, label: str) -> None:
    out = onnx.ModelProto()
    out.CopyFrom(m)
    # converted below opset 9, a graph input slope (an initializer-input from IR 4 on) is a
    # run-time slope, inlined on request; the bundled slopes are finite, so exactly
    result = inline_proto(out, functions="all", allow_nonfinite_slope=True)
    legacy_prelu = sum(n.op == "PRelu" and n.band == "legacy" for n in result.nodes)
    assert len(result.notes) <= legacy_prelu, label
    assert not ACTS & _ops(out), label
    assert not out.functions, label
    onnx.checker.check_model(out, full_check=True)
    exact = all(n.signed_zero_exact for n in result.nodes)
    ref, got = evaluate(m, feeds), evaluate(out, feeds)
    assert list(ref) == list(got)
    for k in ref:
        c = compare(np.asarray(ref[k]), np.asarray(got[k]), ulp=0, signed_zeros=exact)
        assert c.ok, f"{label}: output {k}: {c.reason}"


@pytest.mark.parametrize("name", NAMES)
def test_bundled_model_inlines_exactly(name):
    m, feeds = _load(name)
    _check(m, feeds, name)


@pytest.mark.parametrize("name", NAMES)
def test_bundled_model_inlines_at_every_opset(name):
    _, feeds = _load(name)
    done = []
    for opset, conv in bundled_at_every_opset(name):
        _check(conv, feeds, f"{name} at opset {opset}")
        done.append(opset)
    assert done, f"{name}: convertible to no opset at all"
