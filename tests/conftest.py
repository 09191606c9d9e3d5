"""Shared test helpers."""

from __future__ import annotations

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
