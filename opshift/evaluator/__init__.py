"""The bundled, version-aware NumPy evaluator: the oracle every opshift rewrite is checked by.

``evaluate(model, inputs)`` runs a model. Each node's kernel is chosen by (domain, op,
schema version in force at its graph's or function's opset): opshift's own from the one
table in :mod:`opshift.evaluator.registry`, else onnx.reference's for that version
(:mod:`opshift.evaluator.onnx_reference`); :mod:`opshift.evaluator.kernels` says which, and
``opshift ops`` prints it for every op version.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx

from ..errors import EvaluationError
from ..modelio import ModelLike, to_proto
from . import registry
from .runtime import NodeContext, Runtime

__all__ = ["evaluate", "NodeContext", "Runtime", "supported_ops", "check_inputs"]


def supported_ops() -> dict[tuple[str, str], tuple[int, ...]]:
    """(domain, op) -> schema versions the evaluator implements."""
    return registry.supported()


def _elem_dtype(vi: onnx.ValueInfoProto) -> np.dtype | None:
    tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
    if tt is None or not tt.elem_type:
        return None
    return onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)


def check_inputs(graph: onnx.GraphProto, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Check that ``inputs`` fit the graph's declared inputs (names, dtypes, ranks, fixed dims)."""
    init_names = {t.name for t in graph.initializer}
    declared = {vi.name: vi for vi in graph.input}
    extra = [k for k in inputs if k not in declared]
    if extra:
        raise EvaluationError(f"input {extra[0]!r} is not an input of the graph "
                              f"(inputs: {', '.join(declared) or 'none'})")
    out: dict[str, np.ndarray] = {}
    for name, vi in declared.items():
        if name not in inputs:
            if name in init_names:
                continue
            raise EvaluationError(f"graph input {name!r} was not given a value")
        v = np.asarray(inputs[name])
        want = _elem_dtype(vi)
        if want is not None and v.dtype != want:
            raise EvaluationError(f"graph input {name!r}: dtype {v.dtype} given, the model "
                                  f"declares {np.dtype(want)}")
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            dims = tt.shape.dim
            if len(dims) != v.ndim:
                raise EvaluationError(f"graph input {name!r}: rank {v.ndim} given (shape "
                                      f"{list(v.shape)}), the model declares rank {len(dims)}")
            for i, d in enumerate(dims):
                if d.HasField("dim_value") and d.dim_value != v.shape[i]:
                    raise EvaluationError(
                        f"graph input {name!r}: dim {i} is {v.shape[i]}, the model declares "
                        f"{d.dim_value}")
        out[name] = v
    return out


def evaluate(model: ModelLike, inputs: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run ``model`` (ModelProto, onnx_ir.Model or path) on ``inputs``; return its outputs."""
    registry._load_all()
    proto, _, _ = to_proto(model, load_external_data=True)
    rt = Runtime(proto)
    feeds = check_inputs(proto.graph, inputs)
    # inf and NaN are values ONNX defines (0 * inf, exp overflow, a negative variance), not
    # errors: one floating-point error state for the whole run, not one per kernel call
    with np.errstate(all="ignore"):
        values = rt.run_graph(proto.graph, rt.opsets, feeds=feeds, once=True)
    return {vi.name: v for vi, v in zip(proto.graph.output, values)}
