"""fuse(inline(m)) gives back the original activation ops, with the same numbers, for every
bundled model converted to every opset 1..newest (a PRelu whose slope is a one-element
constant as the LeakyRelu computing the same)."""

from __future__ import annotations

import collections

import ml_dtypes
import numpy as np
import onnx
import pytest
from conftest import MODELS, bundled, bundled_at_every_opset
from onnx import numpy_helper

from opshift import evaluate, opsets
from opshift.errors import OpshiftError
from opshift.fuse.driver import fuse_with_result
from opshift.inline import inline
from opshift.verify import compare

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ACTS = ("PRelu", "LeakyRelu", "Selu")
NAMES = sorted(p.stem for p in MODELS.glob("*.onnx"))


def _load(name: str):
    m, feeds, _ = bundled(name)
    return m, feeds


def activation_counts(m: onnx.ModelProto) -> collections.Counter:
    """(scope kind, op) -> count over the main graph, subgraphs and functions."""
    counts: collections.Counter = collections.Counter()

    def nodes(ns, where):
        for n in ns:
            if n.op_type in ACTS and n.domain in ("", "ai.onnx"):
                counts[(where, n.op_type)] += 1
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    nodes(a.g.node, "subgraph")
                for g in a.graphs:
                    nodes(g.node, "subgraph")

    nodes(m.graph.node, "graph")
    for f in m.functions:
        nodes(f.node, f"function {f.name}")
    return counts


def _runtime_slopes(m: onnx.ModelProto) -> int:
    """PRelu nodes of the main graph whose slope is not a constant (a graph input a caller
    may feed, or computed from one)."""
    inputs = {v.name for v in m.graph.input}
    inits = {t.name for t in m.graph.initializer}
    fixed = (inits if m.ir_version < 4 else inits - inputs)  # before IR 4 all are listed
    for n in m.graph.node:
        if n.op_type == "Constant" or (n.op_type in ("Cast", "Squeeze", "Unsqueeze", "Reshape")
                                       and n.input[0] in fixed):
            fixed.add(n.output[0])
    return sum(1 for n in m.graph.node if n.op_type == "PRelu" and n.input[1] not in fixed)


def _one_element_slopes(m: onnx.ModelProto) -> int:
    """PRelu nodes of the main graph whose slope is a one-element constant of a float type
    LeakyRelu accepts, whose value a float32 alpha reproduces: fuse gives LeakyRelu for them."""
    inputs = {v.name for v in m.graph.input}
    values = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer
              if m.ir_version < 4 or t.name not in inputs}
    for n in m.graph.node:
        if n.op_type == "Constant" and n.attribute[0].name == "value":
            values[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
        elif n.op_type in ("Squeeze", "Unsqueeze", "Reshape") and n.input[0] in values:
            values[n.output[0]] = values[n.input[0]]
    count = 0
    for n in m.graph.node:
        v = values.get(n.input[1]) if n.op_type == "PRelu" else None
        if v is None or v.size != 1 or v.dtype.kind != "f" and v.dtype != ml_dtypes.bfloat16:
            continue
        count += bool(np.float32(v.ravel()[0]).astype(v.dtype) == v.ravel()[0])
    return count


def _roundtrip(m: onnx.ModelProto, feeds, label: str) -> bool:
    try:
        # a run-time slope below opset 9 is inlined on purpose: fuse must refuse it back
        inlined = inline(m, allow_nonfinite_slope=True)
    except OpshiftError:
        return False  # inline refuses this model at this opset (inline's tests cover why)
    assert not activation_counts(inlined), label
    fused, result = fuse_with_result(inlined)
    want = activation_counts(m)
    runtime = _runtime_slopes(m)
    if runtime and opsets.opset_of(m) < 9:
        # Before Where (opset 9) inline writes PRelu with a runtime slope s as
        # Relu(x) - Relu(-x)*s, which is NaN for x > 0 when s is inf; PRelu is x there.
        # fuse must not assume the slope finite, so it refuses -- and says so.
        reasons = [e.detail for e in result.refused]
        assert sum("slope is not a constant" in r for r in reasons) == runtime, reasons
        want[("graph", "PRelu")] -= runtime
    leaky = _one_element_slopes(m)  # a one-element constant slope comes back as LeakyRelu
    want[("graph", "PRelu")] -= leaky
    want[("graph", "LeakyRelu")] += leaky
    want = +want
    assert activation_counts(fused) == want, (
        f"{label}: {activation_counts(fused)} != {activation_counts(m)}; refused: "
        + "; ".join(f"{e.node}: {e.detail}" for e in result.refused))
    onnx.checker.check_model(fused, full_check=True)
    used = {i for n in fused.graph.node for i in n.input} | {o.name for o in fused.graph.output}
    for n in fused.graph.node:
        if n.op_type != "Loop":  # (a Loop body reads outer values without listing them)
            assert any(o in used for o in n.output), f"{label}: dead node {n.name} left"
    ref, got = evaluate(m, feeds), evaluate(fused, feeds)
    assert list(ref) == list(got)
    for k in ref:
        # fused ops are the original ops: bit for bit, signed zeros and NaN included
        c = compare(np.asarray(ref[k]), np.asarray(got[k]), ulp=0)
        if not (runtime and opsets.opset_of(m) < 9):
            assert c.ok, f"{label}: output {k}: {c.reason}"
    return True


@pytest.mark.parametrize("name", NAMES)
def test_bundled_model_fuse_inline_roundtrip_at_every_opset(name):
    _, feeds = _load(name)
    done = []
    for opset, conv in bundled_at_every_opset(name):
        if _roundtrip(conv, feeds, f"{name} at opset {opset}"):
            done.append(opset)
    assert done, f"{name}: convertible to no opset at all"


def _synthetic(op: str, attrs: dict, slope, opset: int) -> onnx.ModelProto:
    from conftest import make_model
    from onnx import TensorProto, helper, numpy_helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4, 5])
    inits = [] if slope is None else [numpy_helper.from_array(np.asarray(slope, np.float32), "s")]
    inputs = ["x", "s"] if op == "PRelu" else ["x"]
    graph_inputs = [x]
    if inits and opsets.ir_version_for_opset(opset) < 4:  # IR 3: initializers are inputs
        graph_inputs.append(helper.make_tensor_value_info("s", TensorProto.FLOAT,
                                                          list(np.shape(slope))))
    return make_model([helper.make_node(op, inputs, ["y"], name="act", **attrs)],
                      graph_inputs, [y], opset=opset, initializers=inits)


SYNTHETIC = {  # every form inline writes: Max / Min / Sub at legacy opsets, bodies above
    "leaky_0.1": ("LeakyRelu", {"alpha": 0.1}, None),
    "leaky_-0.5": ("LeakyRelu", {"alpha": -0.5}, None),
    "leaky_3": ("LeakyRelu", {"alpha": 3.0}, None),
    "leaky_0": ("LeakyRelu", {"alpha": 0.0}, None),
    "selu": ("Selu", {}, None),
    "selu_attrs": ("Selu", {"alpha": 2.0, "gamma": 0.5}, None),
    "prelu_channel": ("PRelu", {}, np.array([0.1, 0.2, 0.3]).reshape(3, 1, 1)),
    "prelu_mixed": ("PRelu", {}, np.array([0.1, -0.2, 3.0]).reshape(3, 1, 1)),
    "prelu_big": ("PRelu", {}, np.array([2.0, 3.0, 4.0]).reshape(3, 1, 1)),
    "prelu_scalar": ("PRelu", {}, np.array([0.25])),
    "prelu_1d_channel": ("PRelu", {}, np.array([0.1, 0.5, 1.0])),  # per channel at <= 6
}


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_every_inline_form_fuses_back_at_every_opset(name):
    op, attrs, slope = SYNTHETIC[name]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((2, 3, 4, 5)) * 3).astype(np.float32)
    x.flat[:7] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45]
    done = 0
    for opset in range(1, opsets.MAX_OPSET + 1):
        if name == "prelu_1d_channel" and opset >= 7:
            continue  # a [3] slope does not broadcast to [..., 5] under numpy rules
        m = _synthetic(op, attrs, slope, opset)
        if _roundtrip(m, {"x": x}, f"{name} at opset {opset}"):
            done += 1
    assert done >= 6


@pytest.mark.parametrize("opset", [5, 8, 11, 18])
def test_verify_passes_on_every_inline_form(opset):
    """--verify's local regions (the matched nodes against the fused op) agree, for every
    form inline writes -- with initializers at IR 3 (listed as inputs) fed as constants, as
    the checks treat them."""
    from opshift.fuse.driver import fuse_proto, verify_fuse

    for name, (op, attrs, slope) in sorted(SYNTHETIC.items()):
        if name == "prelu_1d_channel" and opset >= 7:
            continue
        inlined = inline(_synthetic(op, attrs, slope, opset), allow_nonfinite_slope=True)
        fused, result = fuse_proto(inlined, capture_regions=True)
        assert len(result.regions) == len(result.fused) == 1, (name, result.lines())
        report, notes = verify_fuse(inlined, fused, result)
        assert report.ok, f"{name} at opset {opset}: {report.summary()}"
        assert len(report.rows) == 2, notes  # the region and the whole model
