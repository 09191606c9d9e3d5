"""``fix --verify``: the original against the fixed model, as every command's --verify."""

from __future__ import annotations

from typing import Any

import onnx


def verify_fix(original: onnx.ModelProto, fixed: onnx.ModelProto, *, seed: int = 0
               ) -> tuple[Any, list[str]]:
    """Compare the whole ``original`` and ``fixed`` models on the same inputs, as every
    command's ``--verify`` does (:func:`opshift.verify`, under the verify policy in force:
    evaluator or onnxruntime, tolerances). When the defect keeps the original from running,
    nothing was compared (a gap of the report), and the fixed model is run alone. Returns
    ``(VerifyReport, notes)``."""
    from opshift.errors import OpshiftError, VerificationError
    from opshift.verify.report import VerifyReport
    from opshift.verify.verifier import verify

    try:
        return verify(original, fixed, seed=seed, rewritten=True), []
    except VerificationError:
        raise  # the original runs and the fixed model does not
    except OpshiftError as e:
        report = VerifyReport(seed=seed)
        report.skip("whole model", f"the original does not run, so there is nothing to "
                    f"compare with: {e}")
    try:
        verify(fixed, fixed, seed=seed)
    except OpshiftError as e:
        return report, [f"the fixed model does not run either: {e}"]
    return report, ["the fixed model runs; each fix is exact by construction"]
