"""Hypothesis strategies: random models holding PRelu/LeakyRelu/Selu, and random pass chains.

Shared by tests/test_properties.py (a bounded number of examples in CI) and bench/soak.py
(10,000+ examples).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from opshift import opsets
from opshift.broadcast import SlopeRule, rule_for_version, slope_shape_for

MAX = opsets.MAX_OPSET
FLOAT_TYPES = [TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16]
INT_TYPES = [TensorProto.INT32, TensorProto.INT64]


@dataclass
class Case:
    """A generated model and a description for failure messages."""

    model: onnx.ModelProto
    desc: str


def _allowed(op: str, opset: int, elem: int) -> bool:
    v = opsets.since_version(op, opset)
    ts = f"tensor({opsets.tensor_type_name(elem)})"
    return v is not None and ts in opsets.allowed_types(op, v)


@st.composite
def slope_shapes(draw, x_shape: tuple[int, ...], rule: SlopeRule) -> tuple[int, ...]:
    """A slope shape that fits X under ``rule`` (legacy per-channel included)."""
    options: list[tuple[int, ...]] = [(1,), ()]
    rank = len(x_shape)
    for k in range(1, rank + 1):
        suffix = x_shape[rank - k:]
        options.append(suffix)
        options.append(tuple(1 if i % 2 else d for i, d in enumerate(suffix)))
    if rule is SlopeRule.LEGACY and rank >= 2:
        options.append((x_shape[1],))
    if rule is SlopeRule.NUMPY and rank >= 2:
        options.append((x_shape[1],) + (1,) * (rank - 2))
    valid = []
    for s in options:
        try:
            slope_shape_for(x_shape, s, rule)
        except Exception:
            continue
        valid.append(s)
    return draw(st.sampled_from(sorted(set(valid))))


@st.composite
def activation_models(draw) -> Case:
    op = draw(st.sampled_from(opsets.ACTIVATIONS))
    opset = draw(st.integers(1, MAX))
    elems = [e for e in FLOAT_TYPES + (INT_TYPES if op == "PRelu" else [])
             if _allowed(op, opset, e)]
    elem = draw(st.sampled_from(elems))
    version = opsets.since_version(op, opset)
    rank = draw(st.integers(1, 4))
    x_shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    np_dtype = helper.tensor_dtype_to_np_dtype(elem)
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    inputs = [helper.make_tensor_value_info("x", elem, list(x_shape))]
    inits: list[onnx.TensorProto] = []
    attrs: dict[str, float] = {}
    node_inputs = ["x"]
    if op == "PRelu":
        s_shape = draw(slope_shapes(x_shape, rule_for_version(version)))
        node_inputs.append("slope")
        if draw(st.booleans()):
            vals = rng.uniform(-2, 2, size=s_shape)
            if np.dtype(np_dtype).kind in "iu":
                vals = np.round(vals * 3)
            inits.append(numpy_helper.from_array(np.asarray(vals).astype(np_dtype), "slope"))
        else:
            inputs.append(helper.make_tensor_value_info("slope", elem, list(s_shape)))
    else:
        if draw(st.booleans()):
            attrs["alpha"] = float(np.float32(draw(st.floats(-2, 2, width=32))))
        if op == "Selu" and draw(st.booleans()):
            attrs["gamma"] = float(np.float32(draw(st.floats(0.125, 3, width=32))))
    if version == 1 and draw(st.booleans()):
        attrs["consumed_inputs"] = [0] * len(node_inputs)  # type: ignore[assignment]
    node = helper.make_node(op, node_inputs, ["y"], name="act", **attrs)
    out = helper.make_tensor_value_info("y", elem, list(x_shape))
    wrap = draw(st.sampled_from(["plain", "if", "function"]))
    functions = []
    nodes = [node]
    if wrap == "if" and opset >= 11 and elem != TensorProto.BFLOAT16:
        then = helper.make_graph([node], "then", [], [out])
        ident = helper.make_node("Identity", ["x"], ["y_else"], name="else_id")
        els = helper.make_graph([ident], "else",
                                [], [helper.make_tensor_value_info("y_else", elem, list(x_shape))])
        inputs.append(helper.make_tensor_value_info("cond", TensorProto.BOOL, []))
        nodes = [helper.make_node("If", ["cond"], ["y"], then_branch=then, else_branch=els,
                                  name="if")]
    elif wrap == "function" and opset >= 13:
        f = helper.make_function("local", "Act", node_inputs, ["y"], [node],
                                 [helper.make_opsetid("", opset)])
        functions.append(f)
        nodes = [helper.make_node("Act", node_inputs, ["y"], domain="local", name="call")]
    else:
        wrap = "plain"
    ir_version = opsets.ir_version_for_opset(opset)
    if ir_version < 4:  # before IR 4 every initializer must also be a graph input
        inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    graph = helper.make_graph(nodes, "g", inputs, [out], initializer=inits)
    imports = [helper.make_opsetid("", opset)]
    if functions:
        imports.append(helper.make_opsetid("local", 1))
    model = helper.make_model(graph, opset_imports=imports, functions=functions)
    model.ir_version = ir_version
    desc = (f"{op}-{version} at opset {opset}, {opsets.tensor_type_name(elem)}, x{list(x_shape)}"
            f", {wrap}, attrs={attrs}"
            + (f", slope {'init' if inits else 'input'} {list(s_shape)}" if op == "PRelu" else ""))
    return Case(model, desc)


def steps(max_len: int = 3):
    """Random chains of ("convert", opset) / ("inline",) / ("fuse",) / ("fix",)."""
    step = st.one_of(st.tuples(st.just("convert"), st.integers(1, MAX)),
                     st.tuples(st.just("inline")), st.tuples(st.just("fuse")),
                     st.tuples(st.just("fix")))
    return st.lists(step, min_size=1, max_size=max_len)
