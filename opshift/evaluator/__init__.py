"""The bundled, version-aware NumPy evaluator: the oracle every opshift rewrite is checked by.

``evaluate(model, inputs)`` runs a model. Each node's kernel is chosen by (domain, op,
schema version in force at its graph's or function's opset): opshift's own from the one
table in :mod:`opshift.evaluator.registry`, else onnx.reference's for that version
(:mod:`opshift.evaluator.onnx_reference`); :mod:`opshift.evaluator.kernels` says which, and
``opshift ops`` prints it for every op version.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

import numpy as np
import onnx

from opshift.errors import EvaluationError
from opshift.evaluator import registry
from opshift.evaluator.runtime import NodeContext, Runtime
from opshift.evaluator.values import checked
from opshift.io.models import ModelLike, to_proto

__all__ = ["evaluate", "NodeContext", "Runtime", "supported_ops", "check_inputs"]


def supported_ops() -> dict[tuple[str, str], tuple[int, ...]]:
    """(domain, op) -> schema versions the evaluator implements."""
    return registry.supported()


def check_inputs(graph: onnx.GraphProto, inputs: Mapping[str, Any]) -> dict[str, Any]:
    """Check that ``inputs`` fit the graph's declared inputs (names; tensors' dtypes, ranks
    and fixed dims; sequences, maps and optionals element by element: see
    :mod:`opshift.evaluator.values`)."""
    init_names = {t.name for t in graph.initializer}
    declared = {vi.name: vi for vi in graph.input}
    extra = [k for k in inputs if k not in declared]
    if extra:
        raise EvaluationError(f"input {extra[0]!r} is not an input of the graph "
                              f"(inputs: {', '.join(declared) or 'none'})")
    out: dict[str, Any] = {}
    for name, vi in declared.items():
        if name not in inputs:
            if name in init_names:
                continue
            raise EvaluationError(f"graph input {name!r} was not given a value")
        out[name] = checked(vi.type, inputs[name], f"graph input {name!r}")
    return out


def evaluate(model: ModelLike, inputs: Mapping[str, Any], *,
             capture: Collection[str] = ()) -> dict[str, Any]:
    """Run ``model`` (ModelProto, onnx_ir.Model or path) on ``inputs``; return its outputs:
    tensors as ndarrays, sequences as lists, maps as dicts, an empty optional as None (see
    :mod:`opshift.evaluator.values`), and the values of the main graph named in ``capture``
    (inputs, initializers or node outputs; a name the run never computes is left out)."""
    registry.load_all()
    proto, _, _ = to_proto(model, load_external_data=True)
    rt = Runtime(proto)
    feeds = check_inputs(proto.graph, inputs)
    kept: dict[str, Any] | None = dict.fromkeys(capture) if capture else None
    # inf and NaN are values ONNX defines (0 * inf, exp overflow, a negative variance), not
    # errors: one floating-point error state for the whole run, not one per kernel call
    with np.errstate(all="ignore"):
        values = rt.run_graph(proto.graph, rt.opsets, feeds=feeds, once=True, kept=kept)
    out = {k: v for k, v in (kept or {}).items() if v is not None}
    out.update((vi.name, v) for vi, v in zip(proto.graph.output, values))
    return out
