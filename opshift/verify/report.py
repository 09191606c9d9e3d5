"""What a check found: one :class:`Row` per compared output, and one :class:`Gap` per thing
that was not checked, gathered in a :class:`VerifyReport` whose :attr:`~VerifyReport.verdict`
is ``ok`` only when nothing was left unchecked."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from opshift.errors import VerificationError
from opshift.verify import policy as _policy
from opshift.verify.comparison import ULP_TOLERANCE


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
    #: False when every element was NaN or infinite on both sides in every round: the two
    #: agree, but such an output tells nothing about what the model computes
    informative: bool = True

    @property
    def name(self) -> str:
        return f"{self.label}: {self.output}" if self.label else self.output

    @property
    def result(self) -> str:
        """``pass``, ``FAIL`` or ``unchecked`` (the two agree, but told nothing)."""
        return "FAIL" if not self.ok else "pass" if self.informative else "unchecked"

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "output": self.output, "dtype": self.dtype,
                "shape": self.shape, "max_abs": _json_num(self.max_abs),
                "max_ulp": _json_num(self.max_ulp), "ok": self.ok, "reason": self.reason,
                "informative": self.informative}


@dataclass(frozen=True)
class Gap:
    """Something a check did not check: ``what`` (a rewrite's label, ``whole model``, an
    output) and ``why``."""

    what: str
    why: str

    def to_dict(self) -> dict[str, str]:
        return {"what": self.what, "why": self.why}


#: what an output that tells nothing is (see :attr:`Row.informative`)
NOT_INFORMATIVE = "NaN or infinite everywhere on both sides: nothing compared"


def _json_num(v):
    """JSON has no inf/NaN: non-finite numbers become strings ("inf", "nan")."""
    if v is None:
        return None
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


@dataclass
class VerifyReport:
    """Per-output comparison rows and what was not checked (:attr:`unchecked`).

    :attr:`mismatch` when a row failed; :attr:`complete` when every row told something and
    nothing was left unchecked; :attr:`ok` when both hold (a pass that checked
    everything it was asked to). :attr:`verdict` says which: ``ok``, ``FAIL``, ``incomplete``.
    """

    rows: list[Row] = field(default_factory=list)
    #: what was not checked, and why (see :meth:`skip`)
    unchecked: list[Gap] = field(default_factory=list)
    inputs: dict[str, dict[str, Any]] = field(default_factory=dict)  # name -> dtype/shape/source
    seed: int | None = None
    rounds: int = 1
    signed_zeros: bool = True  # whether -0.0 vs +0.0 counted as a difference
    #: the tolerances and backend in force when it was made (:mod:`opshift.verify.policy`)
    policy: _policy.Policy = field(default_factory=_policy.current)
    #: ``Op-version`` -> where the evaluator's kernel came from ("opshift", "function body",
    #: "onnx.reference")
    kernels: dict[str, str] = field(default_factory=dict)
    #: how the check was made where that is a choice (the sizes given to open dims)
    notes: list[str] = field(default_factory=list)
    #: values of the reference's main graph kept from its run (``verify(capture=...)``)
    context: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def mismatch(self) -> bool:
        """Some output differs."""
        return not all(r.ok for r in self.rows)

    @property
    def gaps(self) -> list[Gap]:
        """What was not checked: :attr:`unchecked`, then each output that told nothing."""
        return self.unchecked + [Gap(r.name if r.label else f"whole model ({r.output})",
                                     NOT_INFORMATIVE) for r in self.rows
                                 if r.ok and not r.informative]

    @property
    def complete(self) -> bool:
        """Nothing was left unchecked and every output compared told something (a command
        that rewrote nothing has nothing to check: complete with no rows)."""
        return not self.unchecked and all(r.informative for r in self.rows)

    @property
    def ok(self) -> bool:
        """No output differs and the check is :attr:`complete`."""
        return self.complete and not self.mismatch

    @property
    def verdict(self) -> str:
        """``FAIL`` (an output differs), ``ok`` (:attr:`ok`) or ``incomplete``."""
        return "FAIL" if self.mismatch else "ok" if self.complete else "incomplete"

    @property
    def failures(self) -> list[Row]:
        return [r for r in self.rows if not r.ok]

    def skip(self, what: str, why: str) -> None:
        """Record that ``what`` was not checked, and why."""
        self.unchecked.append(Gap(what, why))

    def merge(self, other: VerifyReport, label: str = "") -> VerifyReport:
        """Append ``other``'s rows and gaps (and input descriptions, named ``label: input``
        when a ``label`` is given) to this report; return self."""
        self.rows.extend(other.rows)
        self.unchecked.extend(other.unchecked)
        self.notes.extend(n for n in other.notes if n not in self.notes)
        for k, v in other.inputs.items():
            self.inputs.setdefault(f"{label}: {k}" if label else k, v)
        self.rounds = max(self.rounds, other.rounds)
        self.kernels.update(other.kernels)
        return self

    def summary(self) -> str:
        """One line: how many outputs matched, what was not checked, or the first failure."""
        n = len(self.rows)
        if self.ok:
            return f"ok: {n} output{'s match' if n != 1 else ' matches'}"
        if not self.mismatch:
            gaps = self.gaps
            first = f"{gaps[0].what}: {gaps[0].why}" if gaps else "nothing was compared"
            return (f"incomplete: {len(gaps)} thing{'s' if len(gaps) != 1 else ''} not "
                    f"checked; {first}")
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
                "-" if r.max_ulp is None else str(r.max_ulp), r.result]
            body.append(cells)
        widths = [max(len(c[i]) for c in [head, *body]) for i in range(len(head))]
        lines = ["  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()
                 for cells in [head, *body]]
        lines.extend(f"FAIL {r.name}: {r.reason}" for r in self.failures)
        lines.extend(f"not checked: {g.what}: {g.why}" for g in self.gaps)
        bodies = sorted(k for k, v in self.kernels.items() if v == "function body")
        if bodies:
            lines.append(f"run through their function body: {', '.join(bodies)}")
        borrowed = sorted(k for k, v in self.kernels.items() if v == "onnx.reference")
        if borrowed:
            lines.append(f"kernels from onnx.reference: {', '.join(borrowed)} (the others: "
                         "opshift's)")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "verdict": self.verdict, "complete": self.complete,
                "unchecked": [g.to_dict() for g in self.gaps], "notes": list(self.notes),
                "seed": self.seed, "rounds": self.rounds,
                "backend": self.policy.backend,
                "tolerance": self.policy.to_dict(ULP_TOLERANCE),
                "tolerance_ulp": self.policy.to_dict(ULP_TOLERANCE)["ulp"],
                "signed_zeros_differ": self.signed_zeros,
                "inputs": self.inputs, "kernels": dict(sorted(self.kernels.items())),
                "rows": [r.to_dict() for r in self.rows]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1, allow_nan=False)
