"""What a check accepts and what runs the models: the :class:`Policy` of :mod:`opshift.verify`.

By default (:data:`DEFAULT`) outputs are compared within :data:`opshift.verify.ULP_TOLERANCE`
and both models run on opshift's bundled evaluator. ``with policy(ulp=..., atol=...,
rtol=..., backend="onnxruntime"):`` changes that for every check made inside the block, so
``opshift verify`` and every command's ``--verify`` (convert, inline, fuse, fix) apply the
same options the same way, however deep in a pass the check is made.

Tolerance: a float element passes when it is within ``ulp`` units in the last place of the
expected value, or when ``|actual - expected| <= atol + rtol * |expected|``. NaN, infinities
and the sign of zero are judged as before (``atol``/``rtol`` never excuse them); integers and
bool stay exact.

Backend ``"onnxruntime"`` runs the models on onnxruntime's CPU provider instead; a model it
cannot load or run is an error naming the model and onnxruntime's reason, never a silent
fallback.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np

BACKENDS = ("opshift", "onnxruntime")


@dataclass(frozen=True)
class Policy:
    """Tolerances and backend of the checks made while it is in force."""

    ulp: int | None = None  # None: the per-dtype table, opshift.verify.ULP_TOLERANCE
    atol: float = 0.0
    rtol: float = 0.0
    backend: str = "opshift"
    #: the whole model's inputs (``--inputs``), which :func:`opshift.verify.verify` feeds
    #: when given none; None: generated ones
    inputs: Mapping[str, np.ndarray] | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        from ..errors import OpshiftError

        if self.backend not in BACKENDS:
            raise OpshiftError(f"unknown verification backend {self.backend!r} (choose "
                               f"{' or '.join(BACKENDS)})")
        for name in ("atol", "rtol"):
            v = getattr(self, name)
            if not (math.isfinite(v) and v >= 0):
                raise OpshiftError(f"{name} must be a finite number >= 0, got {v}")
        if self.ulp is not None and self.ulp < 0:
            raise OpshiftError(f"ulp must be >= 0, got {self.ulp}")

    def to_dict(self, table: Mapping[str, int]) -> dict[str, Any]:
        """The tolerance as reports show it (``table``: the default per-dtype ULP bounds)."""
        ulp = dict(table) if self.ulp is None else {k: self.ulp for k in table}
        return {"ulp": ulp, "atol": self.atol, "rtol": self.rtol}

    def within(self, e: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Elements of finite ``e``/``a`` that ``atol``/``rtol`` accept."""
        if not (self.atol or self.rtol):
            return np.zeros(e.shape, bool)
        e64, a64 = e.astype(np.float64), a.astype(np.float64)
        return np.abs(a64 - e64) <= self.atol + self.rtol * np.abs(e64)


DEFAULT = Policy()
_POLICY: ContextVar[Policy] = ContextVar("opshift_verify_policy", default=DEFAULT)


def current() -> Policy:
    """The policy in force."""
    return _POLICY.get()


@contextlib.contextmanager
def policy(*, ulp: int | None = None, atol: float = 0.0, rtol: float = 0.0,
           backend: str = "opshift", inputs: Mapping[str, np.ndarray] | None = None
           ) -> Iterator[Policy]:
    """Make every check inside the block use these tolerances and this backend, and every
    check of a whole model these ``inputs``."""
    p = Policy(ulp, float(atol), float(rtol), backend, inputs)
    token = _POLICY.set(p)
    try:
        yield p
    finally:
        _POLICY.reset(token)


def run_onnxruntime(model, feeds: Mapping[str, np.ndarray]) -> list[Any]:
    """The outputs of ``model`` (a ModelProto) on onnxruntime's CPU provider, in order, with
    its basic graph optimizations only: the fusions of its full level are chosen per opset
    (a Slice made a Split at one opset and not at another) and round differently, so two
    models computing the same would differ by what onnxruntime fused, not by what they say.

    Raises :class:`opshift.errors.UnsupportedError` with onnxruntime's one-line reason when
    it is not installed or cannot load the model, :class:`~opshift.errors.EvaluationError`
    when it fails to run it on ``feeds``.
    """
    from ..errors import UnsupportedError

    try:
        import onnxruntime as ort
    except ImportError as e:
        raise UnsupportedError("onnxruntime is not installed (pip install onnxruntime)") from e
    from ..errors import EvaluationError

    def reason(e: Exception) -> str:  # onnxruntime raises many types; its first line says why
        return (str(e).strip().splitlines() or [type(e).__name__])[0][:300]

    try:
        so = ort.SessionOptions()
        so.log_severity_level = 4
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
    except Exception as e:
        raise UnsupportedError(f"onnxruntime cannot load it: {reason(e)}") from e
    try:
        names = {i.name for i in sess.get_inputs()}
        outs = sess.run(None, {k: v for k, v in feeds.items() if k in names})
    except Exception as e:
        raise EvaluationError(f"onnxruntime failed to run it: {reason(e)}") from e
    from ..evaluator.values import held

    return [held(vi.type, v) for vi, v in zip(model.graph.output, outs)]
