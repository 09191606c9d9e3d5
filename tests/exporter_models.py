"""Models shaped like what exporters write for PRelu / LeakyRelu / Selu, built with onnx.helper.

Each :class:`Form` names the exporter and version it mimics and what ``opshift fuse`` makes of
it (``fused``: the op by default; ``rounding``: the op only with ``allow_rounding``; neither:
refused, ``reason`` says why). The node sequences, operand orders, constant kinds and shapes
follow the exporters' sources:

* tf2onnx 1.17.0: ``onnx_opset/math.py`` (LeakyRelu, Selu, Prelu are direct ops), the
  ``leakyrelu_rewriter`` (``Maximum(alpha*x, x)`` -> LeakyRelu only for a Const alpha < 1),
  grappler constant folding (``-alpha`` becomes one Const), the transpose optimizer's Mul
  handler (a ``[1, 1, C]`` constant becomes ``[1, C, 1, 1]`` once the Conv's Transpose is
  pushed through). Keras PReLU is ``relu(x) + (-alpha) * relu(-x)``; standalone Keras
  2.0-2.2 ``selu`` is ``scale * tf.where(x > 0, elu(x), alpha * elu(x))``.
* keras2onnx 1.7.0: ``ke2onnx/adv_activation.py`` (PReLU, LeakyReLU layers -> PRelu,
  LeakyRelu through onnxconverter-common), its TF-op path (``_builtin.py``: each TF op on
  its own, no constant folding; ``Maximum`` -> ``Max`` + ``Identity``).
* paddle2onnx 2.1.0 (``mapper/activation/activation.cc``: prelu -> PRelu with the slope
  reshaped to ``[-1, 1, 1]``, leaky_relu -> LeakyRelu, selu -> Selu; ``mapper/tensor/scale.cc``:
  ``alpha * x`` in user code is ``Mul(x, [alpha]) + [0]``).
* PyTorch TorchScript exporter (torch 2.x ``symbolic_opset9/11``: prelu -> PRelu, leaky_relu
  -> LeakyRelu, selu -> Selu; ``clamp(x, min=0)`` -> ``Clip(x, Cast(0), )`` from opset 11,
  ``Clip(x, min=0.0)`` before; scalars as Constant nodes of X's type).
* PyTorch dynamo exporter: torch 2.1-2.4 ``dynamo_export`` decomposed ``aten._prelu_kernel``
  into ``where(x > 0, x, weight * x)`` (weight viewed as ``[1, C, 1, 1]`` by ``aten.prelu``);
  torch 2.5+ with onnxscript's torchlib 0.7 (``aten_prelu`` -> PRelu, ``aten_elu`` ->
  ``Elu(x * input_scale) * scale``, which ``F.selu`` becomes, ``aten_clamp`` -> Clip with
  ``CastLike`` bounds and the omitted one left out).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
from conftest import make_model, vi
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

SELU_ALPHA = 1.6732632423543772
SELU_SCALE = 1.0507009873554805
C, H, W = 3, 4, 5
CHANNELS = np.array([0.25, 0.75, 0.5], np.float32)  # trained PReLU slopes (positive)
MIXED = np.array([0.25, -0.5, 1.5], np.float32)  # one negative, one > 1


@dataclass
class Form:
    exporter: str  # exporter, version and what the model computes
    build: Callable[[], onnx.ModelProto]
    fused: str | None = None  # op fused by default
    rounding: str | None = None  # op fused only with allow_rounding
    reason: str = ""  # a part of the refusal (when ``fused`` is None)
    signed_zeros: bool = True  # ``fused`` keeps the sign of every zero


class Graph:
    """A graph under construction: nodes named as the exporter names them."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def node(self, op: str, inputs, name: str, output: str | None = None, **attrs) -> str:
        out = output or f"{self.prefix}{name}:0"
        self.nodes.append(helper.make_node(op, list(inputs), [out], name=self.prefix + name,
                                           **attrs))
        return out

    def init(self, name: str, value, dtype=np.float32) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def const(self, name: str, value, dtype=np.float32, output: str | None = None) -> str:
        t = numpy_helper.from_array(np.asarray(value, dtype))
        return self.node("Constant", [], name, output=output, value=t)

    def model(self, x_shape, opset: int, y_shape=None) -> onnx.ModelProto:
        """X is the graph input ``x`` (float), the output ``y``."""
        g_in = helper.make_tensor_value_info("x", TP.FLOAT, list(x_shape))
        g_out = helper.make_tensor_value_info("y", TP.FLOAT, list(y_shape or x_shape))
        return make_model(self.nodes, [g_in], [g_out], opset=opset, initializers=self.inits)


# -- tf2onnx / keras2onnx: Keras PReLU = relu(x) + (-alpha) * relu(-x) -----------------------


def _keras_prelu(g: Graph, x: str, neg_alpha: str) -> str:
    pos = g.node("Relu", [x], "Relu")
    neg_x = g.node("Neg", [x], "Neg_1")
    relu_neg = g.node("Relu", [neg_x], "Relu_1")
    mul = g.node("Mul", [neg_alpha, relu_neg], "mul")
    return g.node("Add", [pos, mul], "add", output="y")


def tf2onnx_prelu_shared_axes(alpha=CHANNELS, opset=15) -> onnx.ModelProto:
    """PReLU(shared_axes=[1, 2]) after a Conv2D: alpha [1, 1, C], folded to -alpha and moved
    to NCHW as [1, C, 1, 1] by the transpose optimizer; x is the Conv's NCHW output."""
    g = Graph("StatefulPartitionedCall/model/p_re_lu/")
    c = g.init("StatefulPartitionedCall/model/p_re_lu/Neg:0",
               -np.asarray(alpha, np.float32).reshape(1, -1, 1, 1))
    _keras_prelu(g, "x", c)
    return g.model((1, len(alpha), H, W), opset)


def tf2onnx_prelu_nhwc(opset=15) -> onnx.ModelProto:
    """PReLU() without shared axes on an NHWC tensor: alpha [H, W, C] stays NHWC (the
    transpose optimizer moves only [.., 1, C] constants), after the Conv's Transpose."""
    g = Graph("StatefulPartitionedCall/model/p_re_lu/")
    rng = np.random.default_rng(1)
    alpha = rng.uniform(0.6, 0.9, (H, W, C)).astype(np.float32)
    c = g.init("StatefulPartitionedCall/model/p_re_lu/Neg:0", -alpha)
    x = g.node("Transpose", ["x"], "conv2d/BiasAdd__6", perm=[0, 2, 3, 1])
    _keras_prelu(g, x, c)
    return g.model((1, C, H, W), opset, y_shape=(1, H, W, C))


def tf2onnx_prelu_dense(opset=13) -> onnx.ModelProto:
    """PReLU() after a Dense layer: alpha [F], x [N, F]."""
    g = Graph("StatefulPartitionedCall/model/p_re_lu_1/")
    c = g.init("StatefulPartitionedCall/model/p_re_lu_1/Neg:0", -np.float32([0.3, 0.6, 0.9, 2.0]))
    _keras_prelu(g, "x", c)
    return g.model((8, 4), opset)


def tf2onnx_prelu_one_alpha(opset=15) -> onnx.ModelProto:
    """PReLU(shared_axes=[1, 2, 3]): one alpha, [1, 1, 1, 1] after the transpose optimizer."""
    g = Graph("StatefulPartitionedCall/model/p_re_lu_2/")
    c = g.init("StatefulPartitionedCall/model/p_re_lu_2/Neg:0",
               np.full((1, 1, 1, 1), -0.75, np.float32))
    _keras_prelu(g, "x", c)
    return g.model((1, C, H, W), opset)


def keras2onnx_prelu_ops(opset=12) -> onnx.ModelProto:
    """keras2onnx's TF-op path: the frozen alpha (an Identity of a Const) negated by a Neg
    node; NHWC x, alpha [1, 1, C] (shared_axes=[1, 2])."""
    g = Graph("p_re_lu/")
    a = g.init("p_re_lu/alpha:0", CHANNELS.reshape(1, 1, C))
    read = g.node("Identity", [a], "ReadVariableOp")
    neg_alpha = g.node("Neg", [read], "Neg")
    _keras_prelu(g, "x", neg_alpha)
    return g.model((1, H, W, C), opset)


def keras2onnx_prelu_ops_no_shared_axes(opset=12) -> onnx.ModelProto:
    g = Graph("p_re_lu/")
    a = g.init("p_re_lu/alpha:0", np.linspace(0.55, 0.95, H * W * C, dtype=np.float32)
               .reshape(H, W, C))
    neg_alpha = g.node("Neg", [g.node("Identity", [a], "ReadVariableOp")], "Neg")
    _keras_prelu(g, "x", neg_alpha)
    return g.model((1, H, W, C), opset)


def tf1_leaky_relu_maximum(alpha=0.2, opset=12, identity=True) -> onnx.ModelProto:
    """TF 1.4-1.12 ``tf.nn.leaky_relu`` = ``maximum(alpha * x, x)``: keras2onnx 1.7.0 (TF-op
    path: Max then Identity), or tf2onnx when its rewriter skips it (alpha >= 1)."""
    g = Graph("leaky_re_lu/LeakyRelu/")
    a = g.init("leaky_re_lu/LeakyRelu/alpha:0", alpha)
    mul = g.node("Mul", [a, "x"], "mul")
    if identity:
        mx = g.node("Max", [mul, "x"], "Maximum")
        g.node("Identity", [mx], "Maximum_identity", output="y")
    else:
        g.node("Max", [mul, "x"], "Maximum", output="y")
    return g.model((1, H, W, C), opset)


def tf_maximum_per_channel(opset=13) -> onnx.ModelProto:
    """``tf.maximum(x, alpha * x)`` with a per-channel alpha variable (NHWC, alpha [C])."""
    g = Graph("model/act/")
    a = g.init("model/act/alpha:0", CHANNELS)
    mul = g.node("Mul", [a, "x"], "mul")
    g.node("Max", ["x", mul], "Maximum", output="y")
    return g.model((1, H, W, C), opset)


def keras_selu_tf2onnx(opset=13) -> onnx.ModelProto:
    """Standalone Keras 2.2 ``selu`` on the TF backend through tf2onnx:
    ``scale * Select(x > 0, Elu(x), alpha * Elu(x))``."""
    g = Graph("dense/Selu/")
    zero = g.init("dense/Selu/Greater/y:0", 0.0)
    alpha = g.init("dense/Selu/mul/x:0", SELU_ALPHA)
    scale = g.init("dense/Selu/mul_1/x:0", SELU_SCALE)
    elu = g.node("Elu", ["x"], "Elu", alpha=1.0)
    gt = g.node("Greater", ["x", zero], "Greater")
    mul = g.node("Mul", [alpha, elu], "mul")
    sel = g.node("Where", [gt, elu, mul], "Select")
    g.node("Mul", [scale, sel], "mul_1", output="y")
    return g.model((4, 8), opset)


# -- PyTorch --------------------------------------------------------------------------------


def torchscript_where(weight=CHANNELS, opset=17) -> onnx.ModelProto:
    """``torch.where(x > 0, x, self.weight * x)``, TorchScript: the scalar 0 a Constant of
    X's type, the weight an initializer."""
    g = Graph("/")
    zero = g.const("Constant", 0.0, output="/Constant_output_0")
    w = g.init("weight", np.asarray(weight).reshape(C, 1, 1))
    gt = g.node("Greater", ["x", zero], "Greater", output="/Greater_output_0")
    mul = g.node("Mul", [w, "x"], "Mul", output="/Mul_output_0")
    g.node("Where", [gt, "x", mul], "Where", output="y")
    return g.model((1, C, H, W), opset)


def torchscript_where_scalar(opset=17) -> onnx.ModelProto:
    """``torch.where(x > 0, x, 0.2 * x)``: ``aten::mul(x, 0.2)``, both scalars Constants."""
    g = Graph("/")
    zero = g.const("Constant", 0.0, output="/Constant_output_0")
    gt = g.node("Greater", ["x", zero], "Greater", output="/Greater_output_0")
    slope = g.const("Constant_1", 0.2, output="/Constant_1_output_0")
    mul = g.node("Mul", ["x", slope], "Mul", output="/Mul_output_0")
    g.node("Where", [gt, "x", mul], "Where", output="y")
    return g.model((1, C, H, W), opset)


def torchscript_clamps(opset=17, bounds=False) -> onnx.ModelProto:
    """``torch.clamp(x, min=0) + self.weight * torch.clamp(x, max=0)``: from opset 11 Clip
    with a Cast of the scalar and the other bound omitted, before it Clip's attributes;
    ``bounds``: ``clamp(x, 0, inf)`` and ``clamp(x, -inf, 0)``, both bounds given."""
    g = Graph("/")
    w = g.init("weight", CHANNELS.reshape(C, 1, 1))
    if opset < 11:
        lo = g.node("Clip", ["x"], "Clip", output="/Clip_output_0", min=0.0,
                    **({"max": float("inf")} if bounds else {}))
        hi = g.node("Clip", ["x"], "Clip_1", output="/Clip_1_output_0", max=0.0,
                    **({"min": float("-inf")} if bounds else {}))
    else:
        zero = g.const("Constant", 0, np.int64, output="/Constant_output_0")
        zf = g.node("Cast", [zero], "Cast", output="/Cast_output_0", to=TP.FLOAT)
        inf = g.const("Constant_1", np.inf, output="/Constant_1_output_0") if bounds else ""
        ninf = g.const("Constant_2", -np.inf, output="/Constant_2_output_0") if bounds else ""
        lo = g.node("Clip", ["x", zf, inf], "Clip", output="/Clip_output_0")
        hi = g.node("Clip", ["x", ninf, zf], "Clip_1", output="/Clip_1_output_0")
    mul = g.node("Mul", [w, hi], "Mul", output="/Mul_output_0")
    g.node("Add", [lo, mul], "Add", output="y")
    return g.model((1, C, H, W), opset)


def torchscript_relu_sub(opset=17) -> onnx.ModelProto:
    """``F.relu(x) - self.weight * F.relu(-x)``."""
    g = Graph("/")
    w = g.init("weight", MIXED.reshape(C, 1, 1))
    pos = g.node("Relu", ["x"], "Relu", output="/Relu_output_0")
    neg = g.node("Neg", ["x"], "Neg", output="/Neg_output_0")
    rn = g.node("Relu", [neg], "Relu_1", output="/Relu_1_output_0")
    mul = g.node("Mul", [w, rn], "Mul", output="/Mul_output_0")
    g.node("Sub", [pos, mul], "Sub", output="y")
    return g.model((1, C, H, W), opset)


def dynamo_prelu_kernel(weight=CHANNELS, opset=18) -> onnx.ModelProto:
    """torch 2.1-2.4 ``dynamo_export`` of nn.PReLU: ``aten.prelu`` views the weight as
    [1, C, 1, 1], ``_prelu_kernel`` decomposes into ``where(x > 0, x, weight * x)``."""
    g = Graph("")
    w = g.init("weight", weight)
    shape = g.const("_val_1", [1, -1, 1, 1], np.int64, output="_val_1")
    view = g.node("Reshape", [w, shape], "aten_view_0", output="view")
    zero = g.const("_val_3", 0.0, output="_val_3")
    gt = g.node("Greater", ["x", zero], "aten_gt_1", output="gt")
    mul = g.node("Mul", [view, "x"], "aten_mul_2", output="mul")
    g.node("Where", [gt, "x", mul], "aten_where_3", output="y")
    return g.model((1, C, H, W), opset)


def dynamo_selu(opset=18, optimized=False) -> onnx.ModelProto:
    """torch 2.5+ ``export(dynamo=True)`` of ``F.selu`` = ``aten.elu(x, alpha, scale)``:
    torchlib's ``Elu(x * CastLike(1, x)) * CastLike(scale, x)``; ``optimized``: after
    onnxscript's optimizer (the casts folded, ``x * 1`` dropped)."""
    g = Graph("")
    if optimized:
        scale = g.init("val_3", SELU_SCALE)
        elu = g.node("Elu", ["x"], "node_Elu_2", output="val_2", alpha=SELU_ALPHA)
    else:
        one = g.node("CastLike", [g.const("val_0", 1.0, output="val_0"), "x"], "node_CastLike_0",
                     output="val_1")
        s = g.node("Mul", ["x", one], "node_Mul_1", output="val_2")
        elu = g.node("Elu", [s], "node_Elu_2", output="val_3", alpha=SELU_ALPHA)
        scale = g.node("CastLike", [g.const("val_4", SELU_SCALE, output="val_4"), "x"],
                       "node_CastLike_3", output="val_5")
    g.node("Mul", [elu, scale], "node_Mul_4", output="y")
    return g.model((4, 8), opset)


def dynamo_clamps(opset=18) -> onnx.ModelProto:
    """torch 2.5+ dynamo: ``clamp(x, min=0) + w * clamp(x, max=0)`` -> ``Clip(x, lo)`` and
    ``Clip(x, , hi)`` with CastLike bounds."""
    g = Graph("")
    w = g.init("weight", CHANNELS.reshape(C, 1, 1))
    zero = g.node("CastLike", [g.const("val_0", 0, np.int64, output="val_0"), "x"],
                  "node_CastLike_0", output="val_1")
    lo = g.node("Clip", ["x", zero], "node_Clip_1", output="val_2")
    hi = g.node("Clip", ["x", "", zero], "node_Clip_2", output="val_3")
    mul = g.node("Mul", [w, hi], "node_Mul_3", output="val_4")
    g.node("Add", [lo, mul], "node_Add_4", output="y")
    return g.model((1, C, H, W), opset)


# -- direct ops (nothing to fuse) ------------------------------------------------------------


def paddle2onnx_prelu(opset=11) -> onnx.ModelProto:
    """paddle2onnx 2.1.0: ``PRelu(x, Reshape(alpha [C], [-1, 1, 1]))``."""
    g = Graph("")
    a = g.init("prelu_0.w_0", CHANNELS)
    shape = g.const("Constant_0", [-1, 1, 1], np.int64, output="Constant_0.tmp_0")
    s = g.node("Reshape", [a, shape], "Reshape_0", output="Reshape_0.tmp_0")
    g.node("PRelu", ["x", s], "PRelu_0", output="y")
    return g.model((1, C, H, W), opset)


def paddle2onnx_scale(maximum: bool = False, bias=0.0, opset=11) -> onnx.ModelProto:
    """paddle2onnx 2.1.0 of ``paddle.where(x > 0, x, 0.1 * x)`` (``maximum``:
    ``paddle.maximum(x, 0.1 * x)``): ``0.1 * x`` is Paddle's ``scale`` op,
    ``Mul(x, [0.1]) + [0.0]``; the ``+ 0`` turns -0 into +0."""
    g = Graph("")
    s = g.const("Constant_1", [0.1], output="Constant_1.tmp_0")
    b = g.const("Constant_2", [bias], output="Constant_2.tmp_0")
    mul = g.node("Mul", ["x", s], "Mul_0", output="Mul_0.tmp_0")
    add = g.node("Add", [mul, b], "Add_0", output="scale_0.tmp_0")
    if maximum:
        g.node("Max", ["x", add], "Max_0", output="y")
    else:
        zero = g.const("fill_constant_0", 0.0, output="fill_constant_0.tmp_0")
        gt = g.node("Greater", ["x", zero], "greater_than_0", output="greater_than_0.tmp_0")
        g.node("Where", [gt, "x", add], "Where_0", output="y")
    return g.model((1, C, H, W), opset)


def dynamo_ir10_metadata() -> onnx.ModelProto:
    """What torch.onnx.export(dynamo=True) writes: IR 10, opset 18, metadata on every node
    (and on a value), ReduceMean's axes as an input."""
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 7, "w")
    axes = numpy_helper.from_array(np.array([1], np.int64), "axes")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["mm"], name="node_MatMul_0"),
             helper.make_node("Relu", ["mm"], ["r"], name="node_Relu_1"),
             helper.make_node("ReduceMean", ["r", "axes"], ["y"], name="node_ReduceMean_2",
                         keepdims=1)]
    for i, n in enumerate(nodes):
        n.metadata_props.add(key="pkg.torch.onnx.stack_trace", value=f"line {i}")
        n.metadata_props.add(key="namespace", value=f": __main__.M/{n.op_type}")
    m = make_model(nodes, [vi("x", TP.FLOAT, [2, 3])], [vi("y", TP.FLOAT, [2, 1])], opset=18,
                   initializers=[w, axes], ir_version=10)
    m.graph.value_info.append(vi("mm", TP.FLOAT, [2, 4]))
    m.graph.value_info[0].metadata_props.add(key="pkg.torch.onnx.original_node_name",
                                             value="mm")
    return m
