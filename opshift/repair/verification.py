"""``fix --verify``: how far a fix can be proven exact by running the model."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import onnx


@dataclass
class FixVerification:
    """How far ``--verify`` could prove a fix exact.

    ``status``: ``'verified'`` (outputs of original and fixed compared equal), ``'mismatch'``
    (they differ: a bug, exit 1), or ``'partial'`` (the original cannot run as-is -- the defect
    makes it invalid -- so only the fixed model was run; ``detail`` says why).
    """

    status: str
    method: str  # 'evaluator', 'onnxruntime', or '' when nothing could run
    detail: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status != "mismatch"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        return f"verify: {self.status} ({self.method or 'nothing ran'}): {self.detail}"


def verify_fix(original: onnx.ModelProto, fixed: onnx.ModelProto, *, seed: int = 0
               ) -> FixVerification:
    """Compare ``original`` and ``fixed`` on the same inputs: with opshift's evaluator, else
    with onnxruntime; when the original cannot run at all, run the fixed model alone."""
    from ..errors import LimitError, OpshiftError, VerificationError
    from ..verify import verify

    try:
        report = verify(original, fixed, seed=seed)
    except VerificationError:
        raise
    except LimitError as e:  # what is over opshift's limits is not handed to onnxruntime
        return FixVerification("partial", "", f"not compared: {e}")
    except OpshiftError as e:
        why_eval = str(e)
    else:
        return FixVerification("verified" if report.ok else "mismatch", "evaluator",
                               report.summary(), [r.to_dict() for r in report.rows])
    why_ort = ""
    try:
        from ..verify import make_inputs

        feeds = make_inputs(original.graph, seed=seed)
    except OpshiftError as e:
        return FixVerification("partial", "", f"no inputs can be generated ({e}); the "
                               "original cannot be compared")
    ref_out = _ort_run(original, feeds)
    if isinstance(ref_out, str):
        why_ort = ref_out
    else:
        got = _ort_run(fixed, feeds)
        if isinstance(got, str):
            return FixVerification("mismatch", "onnxruntime", f"the original runs on "
                                   f"onnxruntime but the fixed model does not: {got}")
        from ..verify import compare

        rows, ok = [], True
        for vi, e, a in zip(original.graph.output, ref_out, got):
            c = compare(e, a)
            ok &= c.ok
            rows.append({"output": vi.name, "ok": c.ok, "max_abs": c.max_abs,
                         "reason": c.reason})
        return FixVerification("verified" if ok else "mismatch", "onnxruntime",
                               f"{sum(r['ok'] for r in rows)} of {len(rows)} outputs match "
                               f"(the evaluator cannot run the original: {why_eval})", rows)
    # The original is invalid as-is: show the fixed model at least runs and checks.
    detail = (f"the original cannot run as-is (evaluator: {why_eval}; onnxruntime: "
              f"{why_ort}); ")
    try:
        onnx.checker.check_model(fixed)
    except onnx.checker.ValidationError as e:
        detail += f"the fixed model fails onnx.checker: {str(e).splitlines()[0]}; "
    except UnicodeDecodeError:  # the checker's message quotes a name that is not UTF-8
        detail += "the fixed model fails onnx.checker (on a name that is not UTF-8); "
    try:
        from ..evaluator import evaluate

        evaluate(fixed, feeds)
        return FixVerification("partial", "evaluator", detail + "the fixed model runs on "
                               "the evaluator; each fix is exact by construction")
    except LimitError as e:
        return FixVerification("partial", "", detail + f"the fixed model was not run: {e}")
    except OpshiftError as e:
        got = _ort_run(fixed, feeds)
        if isinstance(got, str):
            return FixVerification("partial", "", detail + f"the fixed model does not run "
                                   f"either (evaluator: {e}; onnxruntime: {got})")
        return FixVerification("partial", "onnxruntime", detail + "the fixed model runs on "
                               "onnxruntime; each fix is exact by construction")


def _ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | str:
    """Outputs from onnxruntime, or a one-line reason it could not run the model."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime is not installed"
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        names = {i.name for i in sess.get_inputs()}
        return sess.run(None, {k: v for k, v in feeds.items() if k in names})
    except Exception as e:  # onnxruntime raises many types; we only need the reason
        return str(e).strip().splitlines()[0][:300]

