"""Shared test helpers."""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"


def make_model(nodes, inputs, outputs, *, opset: int, initializers=(), functions=(),
               extra_opsets=(), ir_version: int | None = None) -> onnx.ModelProto:
    """A model at ``opset`` with the IR version that opset belongs to."""
    from opshift.opsets import ir_version_for_opset

    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs),
                              initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    *extra_opsets],
                              functions=list(functions))
    model.ir_version = ir_version or ir_version_for_opset(opset)
    return model


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@functools.cache
def bundled(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A bundled model with its .npz inputs and expected outputs (bfloat16 arrays, stored as
    uint16 bits, viewed back as bfloat16). Cached: callers must not mutate the model."""
    import ml_dtypes

    m = onnx.load(MODELS / f"{name}.onnx")
    z = np.load(MODELS / f"{name}.npz")
    dtypes = {vi.name: helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
              for vi in [*m.graph.input, *m.graph.output]}

    def arr(key: str) -> np.ndarray:
        v = z[key]
        return v.view(ml_dtypes.bfloat16) if dtypes[key.split(":", 1)[1]] == ml_dtypes.bfloat16 \
            else v

    ins = {k.split(":", 1)[1]: arr(k) for k in z.files if k.startswith("input:")}
    outs = {k.split(":", 1)[1]: arr(k) for k in z.files if k.startswith("output:")}
    return m, ins, outs


@functools.cache
def bundled_at_every_opset(name: str) -> tuple[tuple[int, onnx.ModelProto], ...]:
    """(opset, converted model) for every opset 1..newest the bundled model converts to
    exactly; opsets convert refuses are left out (convert's own tests say why). Cached and
    shared by the inline and fuse round-trip tests: callers must not mutate the models."""
    from opshift.errors import OpshiftError
    from opshift.opsets import MAX_OPSET
    from opshift.passes.convert import convert

    m = bundled(name)[0]
    out = []
    for opset in range(1, MAX_OPSET + 1):
        try:
            out.append((opset, convert(m, opset)))
        except OpshiftError:
            continue
    return tuple(out)
