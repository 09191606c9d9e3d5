"""Checking a rewritten model as every command's ``--verify`` does: each rewrite on its own,
then the whole model, then, on the values the whole model computed around them, the rewrites
that generated values could not check. What none of these checked is a gap of the report."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

import onnx

from opshift.errors import ModelLoadError, OpshiftError, VerificationError
from opshift.verify.report import VerifyReport


def verify_rewritten(reference: onnx.ModelProto, candidate: onnx.ModelProto,
                     rewrites: Iterable[Any], *, seed: int = 0, signed_zeros: bool = True,
                     finite: Collection[str] = (), strict: Collection[str] = (),
                     unchecked: Iterable[tuple[str, str]] = ()) -> VerifyReport:
    """Check ``candidate``, a rewrite of ``reference``, and say what was not checked.

    ``rewrites`` (:class:`~opshift.verify.Rewrite`) are checked one by one on generated
    inputs (:func:`~opshift.verify.check_rewrites`); one that cannot be checked so raises
    when its label is in ``strict``, else is checked again on the values its inputs hold in
    the whole model's run (:func:`~opshift.verify.check_in_context`). ``unchecked``: (label,
    why) of rewrites that have no region of their own. Then both whole models run on the
    same inputs (``signed_zeros``, ``finite`` as for :func:`~opshift.verify.verify`).

    A rewrite neither check reached is covered when the whole model ran and matched (a note
    says how many, and why); else it is a gap, as is a whole model that did not run. A
    mismatch, or a candidate failing where the reference runs, raises
    :class:`VerificationError`.
    """
    from opshift.verify.verifier import (
        check_in_context,
        check_rewrites,
        evaluator_supports,
        region_inputs,
        verify,
    )

    report = VerifyReport(seed=seed, signed_zeros=signed_zeros)
    pending: list[tuple[Any, str]] = []  # (rewrite, why it was not checked alone)
    for rw, (label, part) in _paired(rewrites, check_rewrites, seed):
        if isinstance(part, VerificationError) or (isinstance(part, OpshiftError)
                                                   and label in strict):
            raise part
        if isinstance(part, OpshiftError):
            pending.append((rw, _cause(str(part), label)))
        else:
            report.merge(part, label)
    alone = [(label, why) for label, why in unchecked]
    why = evaluator_supports(reference) or evaluator_supports(candidate)
    whole: VerifyReport | None = None
    if why is not None:
        report.skip("whole model", why)
    else:
        capture = {n for rw, _ in pending for n in _names(rw, region_inputs)}
        try:
            whole = verify(reference, candidate, seed=seed, signed_zeros=signed_zeros,
                           finite=finite, rewritten=True, capture=capture)
        except (ModelLoadError, VerificationError):
            raise  # the model's own data is broken, or the rewrite fails to run
        except OpshiftError as e:
            report.skip("whole model", str(e))
    if whole is not None:
        still = []
        for rw, cause in pending:
            part = check_in_context(rw, whole.context)
            if isinstance(part, VerificationError):
                raise part
            if isinstance(part, OpshiftError):
                still.append((rw.label, cause))
            else:
                report.merge(part, rw.label)
        alone += still
        report.merge(whole)  # (its row last, after every rewrite's)
    else:
        alone += [(rw.label, cause) for rw, cause in pending]
    if alone and whole is not None and whole.complete:
        for cause, labels in _by_cause(alone).items():
            report.notes.append(f"{_count(labels)} checked only within the whole model "
                                f"({_some(labels)}): on their own, {cause}")
    else:
        for label, cause in alone:
            report.skip(label, cause)
    return report


def _paired(rewrites: Iterable[Any], check_rewrites, seed: int):
    """Each rewrite with its outcome (check_rewrites answers each before taking the next)."""
    held: list[Any] = []

    def feed():
        for rw in rewrites:
            held.append(rw)
            yield rw
    for label, part in check_rewrites(feed(), seed=seed):
        yield held.pop(0), (label, part)


def _names(rw, region_inputs) -> list[str]:
    try:
        return region_inputs(rw)
    except OpshiftError:
        return []


def _cause(text: str, label: str) -> str:
    """An error's text less the rewrite's own name, so that rewrites failing for one reason
    group into one line."""
    for role in ("before", "after", "rewrite"):
        text = text.replace(f"{role} {label}: ", "")
    return text.replace(label, "the node")


def _by_cause(items: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for label, cause in items:
        out.setdefault(cause, []).append(label)
    return out


def _count(labels: list[str]) -> str:
    return f"{len(labels)} rewrite{'s' if len(labels) != 1 else ''}"


def _some(labels: list[str], most: int = 3) -> str:
    shown = ", ".join(labels[:most])
    return shown + (f" and {len(labels) - most} more" if len(labels) > most else "")


def group_gaps(report: VerifyReport) -> list[str]:
    """The report's gaps as lines, those with one cause in one line with a count."""
    lines = []
    for cause, labels in _by_cause((g.what, g.why) for g in report.gaps).items():
        if len(labels) == 1:
            lines.append(f"{labels[0]}: {cause}")
        else:
            lines.append(f"{_count(labels)} ({_some(labels)}): {cause}")
    return lines
