#!/usr/bin/env python3
"""Regenerate opshift's bundled sample models and their expected outputs.

Usage::

    python models/generate.py [OUT_DIR]      # default: the folder this script lives in

Every model is written as ``<name>.onnx`` next to ``<name>.npz`` holding its inputs
(``input:<name>``) and expected outputs (``output:<name>``). The expected outputs are computed
here with plain NumPy formulas, never with opshift, so the evaluator is tested against numbers
it did not produce. bfloat16 arrays are stored as their uint16 bit patterns (``.npy`` cannot
hold ml_dtypes types without pickle); view them as the dtype the model declares.

Determinism: inputs come from PCG64's raw 64-bit stream (stable across NumPy versions) turned
into floats with exact integer arithmetic only, models are built in a fixed order with fixed
names, and the ``.npz`` archives are written uncompressed with a fixed timestamp, so two runs
give byte-identical files. Expected outputs that go through ``exp`` (Selu) can differ in the
last bit between machines whose libm/SIMD ``exp`` differ; everything else is exact IEEE
arithmetic.

Conv, BatchNormalization, Gemm and MatMul weights and inputs are small dyadic rationals chosen
so every partial sum is exactly representable in float32: their results do not depend on the
summation order, and the expected outputs are exact. The generator asserts this.
"""

from __future__ import annotations

import io
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent

#: Selu-1's attribute defaults as onnx's schema stores them (float32 attributes).
SELU1_ALPHA = 1.6732
SELU1_GAMMA = 1.0507
#: Selu-6 and Selu-22's attribute defaults.
SELU6_ALPHA = 1.67326319217681884765625
SELU6_GAMMA = 1.05070102214813232421875
#: LeakyRelu's alpha default (versions 1, 6, 16).
LEAKY_ALPHA = 0.01

PRODUCER = "opshift models/generate.py"
BF16 = np.dtype(ml_dtypes.bfloat16)
F32 = np.float32

# ----------------------------------------------------------------------------------------------
# Reference formulas, straight from the ONNX operator pages, evaluated in X's dtype; float16
# and bfloat16 are widened to float32, computed there and rounded once (as runtimes compute
# them).


def _wide(x: np.ndarray) -> np.ndarray:
    """X in the type the formulas compute in: float32 for float16/bfloat16, else X."""
    return x.astype(np.float32) if x.dtype in (np.dtype(np.float16), BF16) else x


def ref_prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    """f(x) = slope * x for x < 0, x for x >= 0; ``slope`` already shaped to broadcast."""
    with np.errstate(invalid="ignore", over="ignore"):  # 0 * -inf is NaN, as in ONNX
        return np.where(x < 0, x * slope, x)


def ref_leaky_relu(x: np.ndarray, alpha: float) -> np.ndarray:
    """f(x) = alpha * x for x < 0, x for x >= 0; the float32 attribute value alpha is cast
    to X's compute type."""
    w = _wide(x)
    with np.errstate(over="ignore"):
        return np.where(w < 0, w * w.dtype.type(np.float32(alpha)), w).astype(x.dtype)


def ref_selu(x: np.ndarray, alpha: float, gamma: float) -> np.ndarray:
    """y = gamma * (alpha * e^x - alpha) for x <= 0, gamma * x for x > 0, each step in X's
    compute type (alpha and gamma are float32 attributes, cast to it), rounded once to X's."""
    w = _wide(x)
    a, g = w.dtype.type(np.float32(alpha)), w.dtype.type(np.float32(gamma))
    with np.errstate(over="ignore"):
        return np.where(w > 0, g * w, g * (a * np.exp(w) - a)).astype(x.dtype)


def ref_conv2d(x: np.ndarray, w: np.ndarray, b: np.ndarray, pad: int) -> np.ndarray:
    """NCHW convolution, stride 1, symmetric zero padding: im2col with an explicit einsum."""
    k = w.shape[2]
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))  # N,C,H,W,k,k
    with np.errstate(invalid="ignore"):
        return np.einsum("nchwij,ocij->nohw", cols, w) + b.reshape(1, -1, 1, 1)


def ref_batchnorm(x, scale, bias, mean, var, eps):
    c = (1, -1) + (1,) * (x.ndim - 2)
    return (x - mean.reshape(c)) / np.sqrt(var.reshape(c) + eps) * scale.reshape(c) \
        + bias.reshape(c)


def ref_maxpool2x2(x: np.ndarray) -> np.ndarray:
    n, c, h, w = x.shape
    return x.reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def assert_exact_f32(value64: np.ndarray, magnitude64: np.ndarray, quantum: float, what: str):
    """Every partial sum of a linear stage is exact in float32 when all terms are multiples of
    ``quantum`` and the sum of their magnitudes stays below 2**24 quanta."""
    fin = np.isfinite(value64)
    v = value64[fin] / quantum
    assert np.array_equal(v, np.round(v)), f"{what}: values are not multiples of {quantum}"
    assert float(np.max(magnitude64[fin], initial=0)) / quantum < 2 ** 24, \
        f"{what}: partial sums may round in float32"


# ----------------------------------------------------------------------------------------------
# Portable deterministic inputs: PCG64's raw stream and integer arithmetic only.


class Source:
    """Deterministic values from a seed, identical on every machine and NumPy version."""

    def __init__(self, seed: int):
        self._bits = np.random.PCG64(seed)

    def ints(self, shape, low: int, high: int) -> np.ndarray:
        """Integers in [low, high] (inclusive)."""
        n = int(np.prod(shape, dtype=np.int64))
        raw = self._bits.random_raw(n) if n else np.zeros(0, np.uint64)
        return (low + (raw % np.uint64(high - low + 1)).astype(np.int64)).reshape(shape)

    def normal(self, shape, scale: float = 1.0) -> np.ndarray:
        """Roughly normal float64 values (Irwin-Hall of 4 uniforms): exact arithmetic only."""
        n = int(np.prod(shape, dtype=np.int64))
        u = (self._bits.random_raw(4 * n) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53
        return ((u.reshape(n, 4).sum(axis=1) - 2.0) * (3.0 ** 0.5 * scale)).reshape(shape)

    def dyadic(self, shape, limit: int, denom: int) -> np.ndarray:
        """Multiples of 1/denom in [-limit/denom, limit/denom] (denom a power of two)."""
        return self.ints(shape, -limit, limit).astype(np.float64) / denom


def specials(dtype) -> list[float]:
    """+-0, +-inf, NaN, +-smallest subnormal, +-smallest normal, +-largest, small negatives."""
    fi = ml_dtypes.finfo(dtype) if np.dtype(dtype) == BF16 else np.finfo(dtype)
    sub, tiny, big = float(fi.smallest_subnormal), float(fi.tiny), float(fi.max)
    return [0.0, -0.0, np.inf, -np.inf, np.nan, sub, -sub, tiny, -tiny, big, -big,
            -1e-3, -20.0, -100.0, 3.0]


def with_specials(values: np.ndarray, dtype) -> np.ndarray:
    """``values`` cast to ``dtype`` with the special values spread evenly over the tensor."""
    out = values.astype(dtype)
    sp = specials(dtype)
    idx = np.linspace(0, out.size - 1, len(sp)).round().astype(np.int64)
    flat = out.reshape(-1)
    flat[idx] = np.array(sp, dtype=np.float64).astype(dtype)
    return out


# ----------------------------------------------------------------------------------------------
# Model building helpers.


def vi(name: str, elem: int, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def init(name: str, arr: np.ndarray) -> onnx.TensorProto:
    return numpy_helper.from_array(arr, name)


def model(graph: onnx.GraphProto, opset: int, doc: str, *, functions=(),
          extra_opsets=()) -> onnx.ModelProto:
    imports = [helper.make_opsetid("", opset), *extra_opsets]
    m = helper.make_model(graph, opset_imports=imports, functions=list(functions),
                          producer_name=PRODUCER, producer_version="1", doc_string=doc)
    m.ir_version = helper.find_min_ir_version_for(imports[:1])  # the ai.onnx opset's IR
    if m.ir_version < 4:  # before IR 4 every initializer must also be a graph input
        declared = {i.name for i in graph.input}
        graph.input.extend(vi(t.name, t.data_type, list(t.dims)) for t in graph.initializer
                           if t.name not in declared)
        m.graph.CopyFrom(graph)
    return m


Case = tuple[onnx.ModelProto, dict[str, np.ndarray], dict[str, np.ndarray]]
GENERATORS: dict[str, Callable[[], Case]] = {}


def generator(name: str):
    def deco(fn):
        GENERATORS[name] = fn
        return fn
    return deco


# ----------------------------------------------------------------------------------------------
# PRelu


@generator("prelu6_conv_per_channel")
def prelu6_conv_per_channel() -> Case:
    src = Source(6)
    x = src.dyadic((1, 3, 8, 8), 16, 8).astype(F32)  # multiples of 1/8 in [-2, 2]
    x[0, 0, 2, 5], x[0, 1, 6, 1], x[0, 2, 4, 4] = np.inf, -np.inf, np.nan
    w = src.dyadic((4, 3, 3, 3), 8, 16).astype(F32)
    b = src.dyadic((4,), 8, 16).astype(F32)
    slope = np.array([0.25, 0.1, 0.0, -0.3], F32)  # learned slopes, one per output channel
    conv64 = ref_conv2d(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), 1)
    mag = ref_conv2d(np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)),
                     np.abs(b.astype(np.float64)), 1)
    assert_exact_f32(conv64, mag, 2.0 ** -7, "conv1")
    conv = conv64.astype(F32)
    y = ref_prelu(conv, slope.reshape(1, 4, 1, 1))  # legacy PRelu: [C] slope on axis 1
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["conv1_out"],
                          name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                          strides=[1, 1]),
         helper.make_node("PRelu", ["conv1_out", "prelu1.weight"], ["y"], name="prelu1")],
        "torch_jit_export", [vi("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [vi("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [init("conv1.weight", w), init("conv1.bias", b), init("prelu1.weight", slope)])
    m = model(g, 6, "Conv 3->4 followed by nn.PReLU(4), as PyTorch exported it at opset 6: the "
                    "slope is 1-D [C] and legacy PRelu applies it per channel along axis 1 "
                    "(numpy broadcasting would not even fit [4] to [1,4,8,8]).")
    return m, {"x": x}, {"y": y}


@generator("prelu1_consumed_inputs")
def prelu1_consumed_inputs() -> Case:
    src = Source(1)
    # W == C == 3: numpy broadcasting would apply the [3] slope along the last axis; legacy
    # PRelu applies it per channel along axis 1. The expected output uses axis 1.
    x = with_specials(src.normal((1, 3, 4, 3), 2.0), F32)
    slope = np.array([0.25, 0.5, 2.0], F32)
    y = ref_prelu(x, slope.reshape(1, 3, 1, 1)).reshape(1, 36)
    g = helper.make_graph(
        [helper.make_node("PRelu", ["data", "prelu_slope"], ["act"], name="prelu",
                          consumed_inputs=[1, 0]),
         helper.make_node("Reshape", ["act", "flat_shape"], ["flat"], name="flatten")],
        "caffe2_prelu_net", [vi("data", TensorProto.FLOAT, [1, 3, 4, 3])],
        [vi("flat", TensorProto.FLOAT, [1, 36])],
        [init("prelu_slope", slope), init("flat_shape", np.array([1, -1], np.int64))])
    m = model(g, 5, "Caffe2-era net at opset 5: PRelu-1 with the legacy consumed_inputs "
                    "attribute, a per-channel [C] slope on NCHW data whose width equals C, "
                    "then Reshape-5.")
    return m, {"data": x}, {"flat": y}


@generator("prelu6_slope_shapes")
def prelu6_slope_shapes() -> Case:
    src = Source(66)
    x = with_specials(src.normal((2, 3, 4, 5), 2.0), F32)
    shared = np.array([0.2], F32)
    chan = np.array([0.1, 0.5, 3.0], F32)
    hw = (src.ints((4, 5), -8, 24) / 16.0).astype(F32)
    ys = {"shared_out": ref_prelu(x, shared.reshape(1, 1, 1, 1)),  # size 1: shared
          "channel_out": ref_prelu(x, chan.reshape(1, 3, 1, 1)),  # [C]: per channel, axis 1
          "spatial_out": ref_prelu(x, hw)}  # [H,W]: numpy broadcasting
    g = helper.make_graph(
        [helper.make_node("PRelu", ["x", "shared_slope"], ["shared_out"], name="prelu_shared"),
         helper.make_node("PRelu", ["x", "channel_slope"], ["channel_out"],
                          name="prelu_channel"),
         helper.make_node("PRelu", ["x", "spatial_slope"], ["spatial_out"],
                          name="prelu_spatial")],
        "legacy_slope_shapes", [vi("x", TensorProto.FLOAT, [2, 3, 4, 5])],
        [vi(k, TensorProto.FLOAT, [2, 3, 4, 5]) for k in ys],
        [init("shared_slope", shared), init("channel_slope", chan), init("spatial_slope", hw)])
    m = model(g, 6, "Legacy PRelu-6 with the three slope shapes old exporters wrote: [1] shared "
                    "by all elements, [C] per channel along axis 1, and [H,W] broadcast the "
                    "numpy way.")
    return m, {"x": x}, ys


@generator("prelu7")
def prelu7() -> Case:
    src = Source(7)
    x = with_specials(src.normal((2, 3, 5, 5), 2.0), F32)
    slope = np.array([0.25, -0.5, 1.5], F32).reshape(3, 1, 1)
    act = ref_prelu(x, slope)
    y = act + x
    g = helper.make_graph(
        [helper.make_node("PRelu", ["x", "block.prelu.slope"], ["block.act"],
                          name="block.prelu"),
         helper.make_node("Add", ["block.act", "x"], ["y"], name="block.residual")],
        "residual_prelu", [vi("x", TensorProto.FLOAT, [2, 3, 5, 5])],
        [vi("y", TensorProto.FLOAT, [2, 3, 5, 5])],
        [init("block.prelu.slope", slope)])
    m = model(g, 7, "Residual PRelu block at opset 7: PRelu-7 with a [C,1,1] slope that "
                    "broadcasts the numpy way, added back to its input.")
    return m, {"x": x}, {"y": y}


@generator("prelu9_int32")
def prelu9_int32() -> Case:
    src = Source(9)
    imin, imax = np.iinfo(np.int32).min, np.iinfo(np.int32).max
    x = src.ints((2, 4, 3, 3), -(2 ** 29), 2 ** 29).astype(np.int32)
    # Channel slopes 0, 1, 3, -2: the extremes go where the product cannot overflow.
    x[0, 0, 0, :] = [imin, imax, -1]
    x[1, 1, 2, :] = [imin, imax, 0]
    x[0, 2, 1, :] = [imax, -1, 0]
    x[1, 3, 0, :] = [imax, -(2 ** 29), -1]
    slope = np.array([0, 1, 3, -2], np.int32).reshape(4, 1, 1)
    wide = np.where(x < 0, x.astype(np.int64) * slope, x)
    assert wide.min() >= imin and wide.max() <= imax
    y = ref_prelu(x, slope)
    assert np.array_equal(y, wide) and y.dtype == np.int32
    g = helper.make_graph(
        [helper.make_node("PRelu", ["acc", "prelu.slope"], ["acc_act"], name="prelu")],
        "int32_accumulator_act", [vi("acc", TensorProto.INT32, [2, 4, 3, 3])],
        [vi("acc_act", TensorProto.INT32, [2, 4, 3, 3])],
        [init("prelu.slope", slope)])
    m = model(g, 11, "PRelu-9 (in force at opset 11) on int32 accumulators with an int32 "
                     "per-channel [C,1,1] slope, including INT32_MIN/INT32_MAX.")
    return m, {"acc": x}, {"acc_act": y}


@generator("prelu16_bf16")
def prelu16_bf16() -> Case:
    src = Source(16)
    x = with_specials(src.normal((1, 4, 4, 4), 2.0), BF16)
    slope = np.array([0.25, 0.1, 0.0, 1.5], np.float64).astype(BF16).reshape(4, 1, 1)
    y = ref_prelu(x, slope)
    assert y.dtype == BF16
    g = helper.make_graph(
        [helper.make_node("PRelu", ["x", "prelu.slope"], ["y"], name="prelu")],
        "bf16_prelu", [vi("x", TensorProto.BFLOAT16, [1, 4, 4, 4])],
        [vi("y", TensorProto.BFLOAT16, [1, 4, 4, 4])],
        [init("prelu.slope", slope)])
    m = model(g, 16, "PRelu-16 on bfloat16 activations with a bfloat16 [C,1,1] slope.")
    return m, {"x": x}, {"y": y}


@generator("prelu16")
def prelu16() -> Case:
    src = Source(17)
    x = with_specials(src.normal((1, 8, 6, 6), 2.0), F32)
    slope = (src.ints((8,), 0, 40) / 64.0).astype(F32).reshape(8, 1, 1)
    y = ref_prelu(x, slope)
    g = helper.make_graph(
        [helper.make_node("PRelu", ["features", "stage2.prelu.weight"], ["stage2.out"],
                          name="stage2.prelu")],
        "prelu_stage", [vi("features", TensorProto.FLOAT, [1, 8, 6, 6])],
        [vi("stage2.out", TensorProto.FLOAT, [1, 8, 6, 6])],
        [init("stage2.prelu.weight", slope)])
    m = model(g, 17, "PRelu-16 (in force at opset 17) with a [C,1,1] float32 slope, the "
                     "shape current PyTorch exports use.")
    return m, {"features": x}, {"stage2.out": y}


@generator("prelu_slope_input")
def prelu_slope_input() -> Case:
    src = Source(15)
    x = with_specials(src.normal((2, 3, 4, 4), 2.0), F32)
    slope = np.array([0.2, 0.0, -1.25], F32).reshape(3, 1, 1)
    y = ref_prelu(x, slope)
    g = helper.make_graph(
        [helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")],
        "prelu_runtime_slope", [vi("x", TensorProto.FLOAT, [2, 3, 4, 4]),
                                vi("slope", TensorProto.FLOAT, [3, 1, 1])],
        [vi("y", TensorProto.FLOAT, [2, 3, 4, 4])])
    m = model(g, 15, "PRelu-9 (in force at opset 15) whose slope is a graph input fed at run "
                     "time, not an initializer: a rewrite cannot read its values.")
    return m, {"x": x, "slope": slope}, {"y": y}


# ----------------------------------------------------------------------------------------------
# LeakyRelu


@generator("leakyrelu1")
def leakyrelu1() -> Case:
    src = Source(101)
    x = with_specials(src.normal((3, 7), 3.0), np.float64)
    y = ref_leaky_relu(x, 0.1)
    g = helper.make_graph(
        [helper.make_node("LeakyRelu", ["conv5_bn"], ["conv5_act"], name="leaky5", alpha=0.1,
                          consumed_inputs=[1])],
        "darknet_leaky", [vi("conv5_bn", TensorProto.DOUBLE, [3, 7])],
        [vi("conv5_act", TensorProto.DOUBLE, [3, 7])])
    m = model(g, 1, "LeakyRelu-1 at opset 1 on float64 with alpha=0.1 and the legacy "
                    "consumed_inputs attribute (in-place in Caffe2).")
    return m, {"conv5_bn": x}, {"conv5_act": y}


@generator("leakyrelu6_default")
def leakyrelu6_default() -> Case:
    src = Source(106)
    x = with_specials(src.normal((4, 16), 2.0), F32)
    y = ref_leaky_relu(x, LEAKY_ALPHA)
    g = helper.make_graph(
        [helper.make_node("LeakyRelu", ["fc1_out"], ["fc1_act"], name="fc1_leaky")],
        "leaky_default_alpha", [vi("fc1_out", TensorProto.FLOAT, [4, 16])],
        [vi("fc1_act", TensorProto.FLOAT, [4, 16])])
    m = model(g, 9, "LeakyRelu-6 (in force at opset 9) without an alpha attribute: the "
                    "schema default 0.01 applies.")
    return m, {"fc1_out": x}, {"fc1_act": y}


@generator("leakyrelu6_alpha")
def leakyrelu6_alpha() -> Case:
    src = Source(107)
    x = with_specials(src.normal((2, 5, 6), 2.0), F32)
    y = ref_leaky_relu(x, 0.2)
    g = helper.make_graph(
        [helper.make_node("LeakyRelu", ["disc.h2"], ["disc.h2_act"], name="disc.leaky2",
                          alpha=0.2)],
        "gan_discriminator_act", [vi("disc.h2", TensorProto.FLOAT, [2, 5, 6])],
        [vi("disc.h2_act", TensorProto.FLOAT, [2, 5, 6])])
    m = model(g, 6, "LeakyRelu-6 at opset 6 with an explicit alpha=0.2 (GAN discriminator "
                    "style).")
    return m, {"disc.h2": x}, {"disc.h2_act": y}


@generator("leakyrelu16_bf16")
def leakyrelu16_bf16() -> Case:
    src = Source(116)
    x = with_specials(src.normal((2, 4, 8), 2.0), BF16)
    y = ref_leaky_relu(x, LEAKY_ALPHA)  # float32 0.01, not bfloat16(0.01) == 0.010009765625
    assert y.dtype == BF16
    g = helper.make_graph(
        [helper.make_node("LeakyRelu", ["hidden"], ["hidden_act"], name="leaky")],
        "bf16_leaky", [vi("hidden", TensorProto.BFLOAT16, [2, 4, 8])],
        [vi("hidden_act", TensorProto.BFLOAT16, [2, 4, 8])])
    m = model(g, 18, "LeakyRelu-16 (in force at opset 18) on bfloat16 with the default alpha, "
                     "computed in float32 with the float32 alpha and rounded once to bfloat16.")
    return m, {"hidden": x}, {"hidden_act": y}


# ----------------------------------------------------------------------------------------------
# Selu


@generator("selu1_defaults")
def selu1_defaults() -> Case:
    src = Source(201)
    x = with_specials(src.normal((2, 10), 2.0), F32)
    y = ref_selu(x, SELU1_ALPHA, SELU1_GAMMA)
    g = helper.make_graph(
        [helper.make_node("Selu", ["fc_out"], ["fc_act"], name="selu")],
        "selu1_net", [vi("fc_out", TensorProto.FLOAT, [2, 10])],
        [vi("fc_act", TensorProto.FLOAT, [2, 10])])
    m = model(g, 1, "Selu-1 at opset 1 without alpha/gamma: Selu-1's own defaults "
                    "1.6732 and 1.0507 apply, not the precise ones of Selu-6.")
    return m, {"fc_out": x}, {"fc_act": y}


@generator("selu6")
def selu6() -> Case:
    src = Source(206)
    x = with_specials(src.normal((2, 12), 2.0), F32)
    y = ref_selu(x, SELU6_ALPHA, SELU6_GAMMA)
    g = helper.make_graph(
        [helper.make_node("Selu", ["fc_out"], ["fc_act"], name="selu")],
        "selu6_net", [vi("fc_out", TensorProto.FLOAT, [2, 12])],
        [vi("fc_act", TensorProto.FLOAT, [2, 12])])
    m = model(g, 6, "Selu-6 at opset 6 without alpha/gamma: the defaults are "
                    "1.67326319217681884765625 and 1.05070102214813232421875.")
    return m, {"fc_out": x}, {"fc_act": y}


@generator("selu6_fp16")
def selu6_fp16() -> Case:
    src = Source(216)
    x = with_specials(src.normal((4, 8), 2.0), np.float16)
    y = ref_selu(x, 1.05, 1.75)
    assert y.dtype == np.float16
    g = helper.make_graph(
        [helper.make_node("Selu", ["logits"], ["act"], name="selu", alpha=1.05, gamma=1.75)],
        "fp16_selu", [vi("logits", TensorProto.FLOAT16, [4, 8])],
        [vi("act", TensorProto.FLOAT16, [4, 8])])
    m = model(g, 14, "Selu-6 (in force at opset 14) on float16 with explicit alpha=1.05, "
                     "gamma=1.75 (float32 attributes cast to float16).")
    return m, {"logits": x}, {"act": y}


@generator("selu22_bf16")
def selu22_bf16() -> Case:
    src = Source(222)
    x = with_specials(src.normal((3, 8), 2.0), BF16)
    y = ref_selu(x, SELU6_ALPHA, SELU6_GAMMA)
    assert y.dtype == BF16
    g = helper.make_graph(
        [helper.make_node("Selu", ["x"], ["y"], name="selu")],
        "bf16_selu", [vi("x", TensorProto.BFLOAT16, [3, 8])],
        [vi("y", TensorProto.BFLOAT16, [3, 8])])
    m = model(g, 22, "Selu-22 on bfloat16 with the default alpha/gamma, computed in float32 "
                     "and rounded once to bfloat16.")
    return m, {"x": x}, {"y": y}


# ----------------------------------------------------------------------------------------------
# Structure: control flow, local functions, symbolic shapes, a small network


@generator("control_flow")
def control_flow() -> Case:
    src = Source(300)
    steps = 4
    x = with_specials(src.normal((4, 4), 2.0), F32)
    slope = np.array([0.25, 0.5, 0.0, 1.25], F32)
    shift = np.array([0.5, -0.5, 0.25, -0.25], F32)
    # Expected: iteration i applies PRelu (even i) or LeakyRelu(h + shift) (odd i), then Selu.
    h, trace = x, []
    for i in range(steps):
        act = ref_prelu(h, slope) if i % 2 == 0 else ref_leaky_relu(h + shift, 0.1)
        trace.append(act)
        h = ref_selu(act, SELU6_ALPHA, SELU6_GAMMA)
    y, acts = h, np.stack(trace)

    then_g = helper.make_graph(
        [helper.make_node("PRelu", ["h_in", "slope"], ["prelu_out"], name="branch_prelu")],
        "prelu_branch", [], [vi("prelu_out", TensorProto.FLOAT, [4, 4])])
    else_g = helper.make_graph(
        [helper.make_node("Add", ["h_in", "shift"], ["shifted"], name="branch_shift"),
         helper.make_node("LeakyRelu", ["shifted"], ["leaky_out"], name="branch_leaky",
                          alpha=0.1)],
        "leaky_branch", [], [vi("leaky_out", TensorProto.FLOAT, [4, 4])])
    body = helper.make_graph(
        [helper.make_node("If", ["use_prelu"], ["act"], name="pick_activation",
                          then_branch=then_g, else_branch=else_g),
         helper.make_node("Selu", ["act"], ["h_out"], name="selu"),
         helper.make_node("Not", ["use_prelu"], ["use_prelu_next"], name="alternate"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going")],
        "step_body",
        [vi("iter", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
         vi("h_in", TensorProto.FLOAT, [4, 4]), vi("use_prelu", TensorProto.BOOL, [])],
        [vi("cond_out", TensorProto.BOOL, []), vi("h_out", TensorProto.FLOAT, [4, 4]),
         vi("use_prelu_next", TensorProto.BOOL, []), vi("act", TensorProto.FLOAT, [4, 4])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["num_steps", "", "x", "start_with_prelu"],
                          ["y", "prelu_flag_out", "acts"], name="refine", body=body)],
        "iterative_refinement", [vi("x", TensorProto.FLOAT, [4, 4])],
        [vi("y", TensorProto.FLOAT, [4, 4]), vi("prelu_flag_out", TensorProto.BOOL, []),
         vi("acts", TensorProto.FLOAT, [steps, 4, 4])],
        [init("num_steps", np.array(steps, np.int64)),
         init("start_with_prelu", np.array(True)), init("slope", slope),
         init("shift", shift)])
    m = model(g, 13, "A Loop of 4 steps whose body picks PRelu (even steps) or "
                     "LeakyRelu(h + shift) (odd steps) in an If on a loop-carried flag "
                     "toggled with Not, then applies Selu. Both If "
                     "branches read outer-scope values: h_in from the Loop body and "
                     "slope/shift from the main graph.")
    flag = np.array(steps % 2 == 0)  # toggled once per step, starting from True
    return m, {"x": x}, {"y": y, "prelu_flag_out": flag, "acts": acts}


@generator("sequence_loop")
def sequence_loop() -> Case:
    src = Source(350)
    x = with_specials(src.normal((3, 4, 4), 2.0), F32)
    slope = np.array([0.25, 0.5, 0.0, 1.25], F32)
    # Expected: each [4, 4] slice of x through PRelu (slope on the last axis), restacked.
    y = np.stack([ref_prelu(x[i], slope) for i in range(3)])

    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.FLOAT,
                                                                        None))
    body = helper.make_graph(
        [helper.make_node("SequenceAt", ["slices", "i"], ["slice"], name="take"),
         helper.make_node("PRelu", ["slice", "slope"], ["act"], name="prelu"),
         helper.make_node("SequenceInsert", ["acc_in", "act"], ["acc_out"], name="append"),
         helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going")],
        "per_slice",
        [vi("i", TensorProto.INT64, []), vi("cond_in", TensorProto.BOOL, []),
         helper.make_value_info("acc_in", seq)],
        [vi("cond_out", TensorProto.BOOL, []), helper.make_value_info("acc_out", seq)])
    g = helper.make_graph(
        [helper.make_node("SplitToSequence", ["x"], ["slices"], name="split", axis=0,
                          keepdims=0),
         helper.make_node("SequenceLength", ["slices"], ["n"], name="count"),
         helper.make_node("SequenceEmpty", [], ["empty"], name="start",
                          dtype=TensorProto.FLOAT),
         helper.make_node("Loop", ["n", "", "empty"], ["acts"], name="each_slice",
                          body=body),
         helper.make_node("ConcatFromSequence", ["acts"], ["y"], name="restack", axis=0,
                          new_axis=1)],
        "per_slice_activation", [vi("x", TensorProto.FLOAT, [3, 4, 4])],
        [vi("y", TensorProto.FLOAT, [3, 4, 4])], [init("slope", slope)])
    m = model(g, 13, "x split into a sequence of its [4, 4] slices (SplitToSequence), a Loop "
                     "that applies PRelu (slope on the last axis) to each slice and appends "
                     "it to a loop-carried sequence (SequenceAt, SequenceInsert), and the "
                     "results stacked back (ConcatFromSequence): a sequence carried through "
                     "control flow, the body reading the slices and slope from outside.")
    return m, {"x": x}, {"y": y}


@generator("local_function")
def local_function() -> Case:
    src = Source(400)
    x = with_specials(src.normal((3, 6), 2.0), F32)
    s1 = np.array([0.25, 0.5, 0.0, -0.5, 1.0, 0.125], F32)
    s2 = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6], F32)

    def block(v, slope, alpha):
        mix = ref_prelu(v, slope) + ref_leaky_relu(v, alpha)
        return ref_selu(mix, SELU6_ALPHA, SELU6_GAMMA)

    h = block(x, s1, 0.2)
    y = block(h, s2, LEAKY_ALPHA)  # second call omits alpha: the function's default applies

    dom = "com.example.blocks"
    leaky = helper.make_node("LeakyRelu", ["X"], ["l"], name="leaky")
    leaky.attribute.append(helper.make_attribute_ref("alpha", onnx.AttributeProto.FLOAT))
    fn = helper.make_function(
        dom, "DualActivation", ["X", "slope"], ["Y"],
        [helper.make_node("PRelu", ["X", "slope"], ["p"], name="prelu"),
         leaky,
         helper.make_node("Add", ["p", "l"], ["mix"], name="mix"),
         helper.make_node("Selu", ["mix"], ["Y"], name="selu")],
        [helper.make_opsetid("", 19)],
        attribute_protos=[helper.make_attribute("alpha", LEAKY_ALPHA)],
        doc_string="Selu(PRelu(X, slope) + LeakyRelu(X, alpha)); alpha defaults to 0.01.")
    g = helper.make_graph(
        [helper.make_node("DualActivation", ["x", "block1.slope"], ["h"], name="block1",
                          domain=dom, alpha=0.2),
         helper.make_node("DualActivation", ["h", "block2.slope"], ["y"], name="block2",
                          domain=dom)],
        "dual_activation_net", [vi("x", TensorProto.FLOAT, [3, 6])],
        [vi("y", TensorProto.FLOAT, [3, 6])],
        [init("block1.slope", s1), init("block2.slope", s2)])
    m = model(g, 19, "A model-local function com.example.blocks::DualActivation (its own "
                     "opset_import, ai.onnx 19) holding PRelu, LeakyRelu and Selu, called "
                     "twice: once with alpha=0.2, once relying on the function's attribute "
                     "default.", functions=[fn], extra_opsets=[helper.make_opsetid(dom, 1)])
    return m, {"x": x}, {"y": y}


@generator("symbolic_batch")
def symbolic_batch() -> Case:
    src = Source(500)
    x = with_specials(src.normal((3, 3, 4, 4), 2.0), F32)  # N = 3 here
    slope = np.array([0.25, 0.5, 0.75], F32).reshape(3, 1, 1)
    p = ref_prelu(x, slope)
    y = ref_selu(ref_leaky_relu(p, 0.3), 1.5, 2.0)
    g = helper.make_graph(
        [helper.make_node("PRelu", ["images", "prelu.slope"], ["p"], name="prelu"),
         helper.make_node("LeakyRelu", ["p"], ["l"], name="leaky", alpha=0.3),
         helper.make_node("Selu", ["l"], ["out"], name="selu", alpha=1.5, gamma=2.0)],
        "dynamic_batch_acts", [vi("images", TensorProto.FLOAT, ["N", 3, 4, 4])],
        [vi("out", TensorProto.FLOAT, ["N", 3, 4, 4])],
        [init("prelu.slope", slope)])
    m = model(g, 20, "Symbolic batch dimension N on input and output (the .npz uses N=3); "
                     "PRelu-16, LeakyRelu-16 with alpha=0.3 and Selu-6 with explicit "
                     "alpha=1.5, gamma=2.0.")
    return m, {"images": x}, {"out": y}


@generator("small_cnn")
def small_cnn() -> Case:
    src = Source(600)
    f64 = np.float64
    x = src.dyadic((2, 3, 8, 8), 8, 4)                     # multiples of 1/4 in [-2, 2]
    w1, b1 = src.dyadic((4, 3, 3, 3), 4, 4), src.dyadic((4,), 4, 4)
    bn_scale = src.ints((4,), 1, 4) / 2.0
    bn_bias = src.dyadic((4,), 4, 4)
    bn_mean = src.dyadic((4,), 4, 4)
    eps = 2.0 ** -10  # var + eps is 1 or 4 exactly, so sqrt is exact
    bn_var = np.array([1.0, 4.0, 1.0, 4.0]) - eps
    slope = np.array([0.25, 0.5, 0.25, 0.5]).reshape(4, 1, 1)
    w2, b2 = src.dyadic((10, 64), 4, 4), src.dyadic((10,), 4, 4)
    alpha = 0.25
    w3, b3 = src.dyadic((10, 5), 4, 4), src.dyadic((5,), 4, 4)

    conv = ref_conv2d(x, w1, b1, 1)
    assert_exact_f32(conv, ref_conv2d(abs(x), abs(w1), abs(b1), 1), 2.0 ** -4, "conv")
    bn = ref_batchnorm(conv, bn_scale, bn_bias, bn_mean, bn_var, eps)
    assert_exact_f32(bn, np.abs(conv) * 4 + 8, 2.0 ** -6, "bn")
    act = ref_prelu(bn, slope)
    pool = ref_maxpool2x2(act)
    flat = pool.reshape(2, -1)
    fc1 = flat @ w2.T + b2
    assert_exact_f32(fc1, np.abs(flat) @ np.abs(w2.T) + np.abs(b2), 2.0 ** -10, "fc1")
    leaky = ref_leaky_relu(fc1, alpha)
    fc2 = leaky @ w3 + b3
    assert_exact_f32(fc2, np.abs(leaky) @ np.abs(w3) + np.abs(b3), 2.0 ** -14, "fc2")
    y = ref_selu(fc2.astype(F32), SELU6_ALPHA, SELU6_GAMMA)

    def c(a):
        return np.asarray(a, f64).astype(F32)

    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["conv1"],
                         name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["conv1", "bn1.weight", "bn1.bias",
                                                "bn1.running_mean", "bn1.running_var"],
                         ["bn1"], name="bn1", epsilon=eps),
        helper.make_node("PRelu", ["bn1", "prelu1.weight"], ["prelu1"], name="prelu1"),
        helper.make_node("MaxPool", ["prelu1"], ["pool1"], name="pool1",
                         kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Flatten", ["pool1"], ["flat"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat", "fc1.weight", "fc1.bias"], ["fc1"], name="fc1",
                         transB=1),
        helper.make_node("LeakyRelu", ["fc1"], ["leaky1"], name="leaky1", alpha=alpha),
        helper.make_node("MatMul", ["leaky1", "fc2.weight"], ["fc2_mm"], name="fc2"),
        helper.make_node("Add", ["fc2_mm", "fc2.bias"], ["fc2"], name="fc2_bias"),
        helper.make_node("Selu", ["fc2"], ["output"], name="selu_out"),
    ]
    inits = [init("conv1.weight", c(w1)), init("conv1.bias", c(b1)),
             init("bn1.weight", c(bn_scale)), init("bn1.bias", c(bn_bias)),
             init("bn1.running_mean", c(bn_mean)), init("bn1.running_var", c(bn_var)),
             init("prelu1.weight", c(slope)), init("fc1.weight", c(w2)),
             init("fc1.bias", c(b2)), init("fc2.weight", c(w3)), init("fc2.bias", c(b3))]
    g = helper.make_graph(nodes, "small_cnn", [vi("input", TensorProto.FLOAT, [2, 3, 8, 8])],
                          [vi("output", TensorProto.FLOAT, [2, 5])], inits)
    m = model(g, 13, "A small CNN at opset 13: Conv, BatchNormalization, PRelu-9 ([C,1,1] "
                     "slope), MaxPool, Flatten, Gemm, LeakyRelu-6, MatMul, Add, Selu-6. "
                     "Weights are small dyadic rationals so every sum is exact in float32.")
    return m, {"input": c(x)}, {"output": y}


# ----------------------------------------------------------------------------------------------
# Writing


def _npy_bytes(arr: np.ndarray) -> bytes:
    if arr.dtype == BF16:
        arr = arr.view(np.uint16)
    buf = io.BytesIO()
    np.lib.format.write_array(buf, arr.copy(order="C"), allow_pickle=False)
    return buf.getvalue()


def write_npz(path: Path, inputs: dict[str, np.ndarray], outputs: dict[str, np.ndarray]):
    """An uncompressed .npz with a fixed timestamp, so identical arrays give identical bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as zf:
        for prefix, arrays in (("input", inputs), ("output", outputs)):
            for name, arr in arrays.items():
                info = zipfile.ZipInfo(f"{prefix}:{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                zf.writestr(info, _npy_bytes(np.asarray(arr)))
    path.write_bytes(buf.getvalue())


def build(name: str) -> Case:
    """Build one model and its case, checking it against onnx's checker."""
    with np.errstate(all="ignore"):  # the special values overflow and make NaNs on purpose
        m, inputs, outputs = GENERATORS[name]()
    onnx.checker.check_model(m, full_check=True)
    for v in outputs.values():
        assert isinstance(v, np.ndarray)
    return m, inputs, outputs


def generate(out_dir: Path = HERE) -> list[Path]:
    """Write every bundled model and its .npz to ``out_dir``; return the paths written."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name in GENERATORS:
        m, inputs, outputs = build(name)
        onnx_path, npz_path = out_dir / f"{name}.onnx", out_dir / f"{name}.npz"
        onnx_path.write_bytes(m.SerializeToString())
        write_npz(npz_path, inputs, outputs)
        written += [onnx_path, npz_path]
    return written


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else HERE
    for p in generate(out):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
