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

Backends ``"onnxruntime"``, ``"openvino"`` and ``"tract"`` run the models on that runtime's CPU
instead (:mod:`opshift.verify.runtimes`); a model it cannot load is a gap of the check naming
the runtime's reason, never a silent fallback, and one it fails to run is a failure.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: what can run the models of a check: opshift's evaluator, or a runtime users convert for
#: (:mod:`opshift.verify.runtimes`), where installed
BACKENDS = ("opshift", "onnxruntime", "openvino", "tract")


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
        from opshift.errors import OpshiftError

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
