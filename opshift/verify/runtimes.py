"""The runtimes a check can run models on besides opshift's evaluator: onnxruntime, OpenVINO
and tract, each on the CPU, each only where installed.

:func:`run` raises :class:`~opshift.errors.UnsupportedError` with the runtime's one-line
reason when it is not installed or cannot load the model (what the user's runtime does not
take is said, not passed), and :class:`~opshift.errors.EvaluationError` when it fails to run
it on the inputs given.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import onnx

from opshift.errors import EvaluationError, UnsupportedError

#: the package each runtime comes from, for the message when it is missing
PACKAGES = {"onnxruntime": "onnxruntime", "openvino": "openvino", "tract": "tract"}


def run(backend: str, model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[Any]:
    """The outputs of ``model`` (external data loaded) on ``backend``, in order."""
    runner = _RUNNERS[backend]
    try:
        outs = runner(model, feeds)
    except (UnsupportedError, EvaluationError):
        raise
    except ImportError as e:
        raise UnsupportedError(f"{backend} is not installed (pip install "
                               f"{PACKAGES[backend]})") from e
    from opshift.evaluator.values import held

    return [held(vi.type, v) for vi, v in zip(model.graph.output, outs)]


def _reason(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]


def _loaded(backend: str, load: Callable[[], Any]) -> Any:
    try:
        return load()
    except ImportError:
        raise
    except Exception as e:  # every runtime raises its own types; the first line says why
        raise UnsupportedError(f"{backend} cannot load it: {_reason(e)}") from e


def _ran(backend: str, call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as e:
        raise EvaluationError(f"{backend} failed to run it: {_reason(e)}") from e


def _onnxruntime(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[Any]:
    """onnxruntime's CPU provider with its basic graph optimizations only: the fusions of its
    full level are chosen per opset (a Slice made a Split at one opset and not at another) and
    round differently, so two models computing the same would differ by what it fused."""
    import onnxruntime as ort

    def load():
        so = ort.SessionOptions()
        so.log_severity_level = 4
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        return ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])

    sess = _loaded("onnxruntime", load)
    names = {i.name for i in sess.get_inputs()}
    return _ran("onnxruntime", lambda: sess.run(
        None, {k: v for k, v in feeds.items() if k in names}))


def _openvino(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[Any]:
    """OpenVINO's CPU plugin in float32 (its default on some CPUs computes in bfloat16)."""
    import openvino as ov

    def load():
        core = ov.Core()
        return core.compile_model(core.read_model(model.SerializeToString(), b""), "CPU",
                                  {"INFERENCE_PRECISION_HINT": "f32"})

    compiled = _loaded("openvino", load)
    names = [i.get_any_name() for i in compiled.inputs]
    result = _ran("openvino", lambda: compiled([feeds[n] for n in names]))
    by_name = {next(iter(k.get_names())): v for k, v in result.items() if k.get_names()}
    return [by_name[vi.name] for vi in model.graph.output]


def _tract(model: onnx.ModelProto, feeds: Mapping[str, np.ndarray]) -> list[Any]:
    """tract, which reads a model from a file only: written to a private temporary folder,
    removed before returning."""
    import tract

    folder = tempfile.mkdtemp(prefix="opshift-tract-")
    try:
        path = os.path.join(folder, "model.onnx")
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
        runnable = _loaded("tract", lambda: tract.onnx().load(path).into_model()
                           .into_runnable())
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    inits = {t.name for t in model.graph.initializer}
    names = [vi.name for vi in model.graph.input if vi.name not in inits]
    # (np.ascontiguousarray would make a scalar an array of one element)
    arrays = [np.require(feeds[n], requirements="C") for n in names]
    outs = _ran("tract", lambda: runnable.run(arrays))
    return [o.to_numpy() for o in outs]


_RUNNERS = {"onnxruntime": _onnxruntime, "openvino": _openvino, "tract": _tract}
