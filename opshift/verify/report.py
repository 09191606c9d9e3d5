"""What a check found: one :class:`Row` per compared output, gathered in a :class:`VerifyReport`."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import VerificationError
from . import policy as _policy
from .comparison import ULP_TOLERANCE


@dataclass
class Row:
    """One compared output. ``label`` names the rewrite (empty for whole-model checks)."""

    output: str
    dtype: str
    shape: list[int] | None
    max_abs: float | None
    max_ulp: int | float | None
    ok: bool
    reason: str = ""
    label: str = ""

    @property
    def name(self) -> str:
        return f"{self.label}: {self.output}" if self.label else self.output

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "output": self.output, "dtype": self.dtype,
                "shape": self.shape, "max_abs": _json_num(self.max_abs),
                "max_ulp": _json_num(self.max_ulp), "ok": self.ok, "reason": self.reason}


def _json_num(v):
    """JSON has no inf/NaN: non-finite numbers become strings ("inf", "nan")."""
    if v is None:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


@dataclass
class VerifyReport:
    """Per-output comparison rows; ``ok`` when every row passed."""

    rows: list[Row] = field(default_factory=list)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> dtype/shape/source
    seed: int | None = None
    rounds: int = 1
    signed_zeros: bool = True  # whether -0.0 vs +0.0 counted as a difference
    #: the tolerances and backend in force when it was made (:mod:`opshift.verify.policy`)
    policy: _policy.Policy = field(default_factory=_policy.current)
    #: ``Op-version`` -> where the evaluator's kernel came from ("opshift", "function body",
    #: "onnx.reference")
    kernels: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.rows)

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if not r.ok]

    def merge(self, other: VerifyReport, label: str = "") -> VerifyReport:
        """Append ``other``'s rows (and input descriptions, named ``label: input`` when a
        ``label`` is given) to this report; return self."""
        self.rows.extend(other.rows)
        for k, v in other.inputs.items():
            self.inputs.setdefault(f"{label}: {k}" if label else k, v)
        self.rounds = max(self.rounds, other.rounds)
        self.kernels.update(other.kernels)
        return self

    def summary(self) -> str:
        """One line: how many outputs matched, or the first failure."""
        n = len(self.rows)
        if self.ok:
            return f"ok: {n} output{'s match' if n != 1 else ' matches'}"
        f = self.failures
        return f"FAIL: {len(f)} of {n} outputs differ; {f[0].name}: {f[0].reason}"

    def raise_if_failed(self, context: str = "") -> None:
        """Raise :class:`VerificationError` (exit 1) naming the first failing output."""
        if not self.ok:
            f = self.failures[0]
            pre = f"{context}: " if context else ""
            raise VerificationError(f"{pre}verification failed: {f.name}: {f.reason}")

    def table(self) -> str:
        """Aligned text table, then one line per failure with its reason."""
        labels = any(r.label for r in self.rows)
        head = (["rewrite"] if labels else []) + ["output", "dtype", "shape", "max abs err",
                                                  "max ulp", "result"]
        body = []
        for r in self.rows:
            # in a table that mixes rewrites with a whole-model check, say which row is which
            cells = ([r.label or "whole model"] if labels else []) + [
                r.output, r.dtype, "?" if r.shape is None else str(r.shape),
                "-" if r.max_abs is None else f"{r.max_abs:.4g}",
                "-" if r.max_ulp is None else str(r.max_ulp), "pass" if r.ok else "FAIL"]
            body.append(cells)
        widths = [max(len(c[i]) for c in [head, *body]) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
                 for cells in [head, *body]]
        lines.extend(f"FAIL {r.name}: {r.reason}" for r in self.failures)
        bodies = sorted(k for k, v in self.kernels.items() if v == "function body")
        if bodies:
            lines.append(f"run through their function body: {', '.join(bodies)}")
        borrowed = sorted(k for k, v in self.kernels.items() if v == "onnx.reference")
        if borrowed:
            lines.append(f"kernels from onnx.reference: {', '.join(borrowed)} (the others: "
                         "opshift's)")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "seed": self.seed, "rounds": self.rounds,
                "backend": self.policy.backend,
                "tolerance": self.policy.to_dict(ULP_TOLERANCE),
                "tolerance_ulp": self.policy.to_dict(ULP_TOLERANCE)["ulp"],
                "signed_zeros_differ": self.signed_zeros,
                "inputs": self.inputs, "kernels": dict(sorted(self.kernels.items())),
                "rows": [r.to_dict() for r in self.rows]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)
