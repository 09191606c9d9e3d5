"""``--verify`` and ``opshift verify`` as every command reports them: the policy from the
options, one table, one closing line, one JSON object."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from opshift.tables import number, plural, screen_width, table, wrap
from opshift.verify.comparison import larger


@contextlib.contextmanager
def policy_of(args, inputs: Mapping[str, Any] | None = None) -> Iterator[None]:
    """The tolerance and backend options in force for the checks made inside the block, and
    the whole model's ``inputs`` (``--inputs``, read) when given."""
    from opshift.verify.policy import policy

    with policy(ulp=args.ulp, atol=args.atol, rtol=args.rtol, backend=args.backend,
                inputs=inputs):
        yield


def describe_policy(report) -> str:
    """``the opshift evaluator, within 4 ulp (float32, float64), 2 ulp (...)``."""
    p = report.policy
    who = "the opshift evaluator" if p.backend == "opshift" else \
        {"onnxruntime": "onnxruntime", "openvino": "OpenVINO", "tract": "tract"}[p.backend] + \
        " (CPU)"
    if p.ulp is None:
        from opshift.verify.comparison import ULP_TOLERANCE

        by: dict[int, list[str]] = {}
        for dtype, n in ULP_TOLERANCE.items():
            by.setdefault(n, []).append(dtype)
        ulp = ", ".join(f"{n} ulp ({', '.join(ds)})" for n, ds in by.items())
    else:
        ulp = f"{p.ulp} ulp"
    extra = f" or |diff| <= {number(p.atol, float)} + {number(p.rtol, float)}*|expected|" \
        if p.atol or p.rtol else ""
    return f"{who}, within {ulp}{extra}"


def counts(report) -> tuple[int, int]:
    """(rewrites checked one by one, outputs of the whole-model comparison)."""
    return len({r.label for r in report.rows if r.label}), sum(not r.label for r in report.rows)


def verify_dict(report, notes: list[str]) -> dict[str, Any]:
    """The ``verify`` object of the JSON schema (see :mod:`._output`)."""
    d = report.to_dict()
    rewrites, whole = counts(report)
    out = {"ok": report.ok, "verdict": report.verdict, "complete": report.complete,
           "unchecked": d["unchecked"], "backend": d["backend"], "tolerance": d["tolerance"],
           "seed": d["seed"], "rounds": d["rounds"],
           "checks": {"rewrites": rewrites, "whole_model": whole > 0},
           "signed_zeros_differ": d["signed_zeros_differ"], "inputs": d["inputs"],
           "kernels": d.get("kernels", {}), "rows": d["rows"],
           "notes": [*report.notes, *notes]}
    return out


def verify_lines(report, notes: list[str], *, verbose: bool,
                 groups: Mapping[str, str] | None = None) -> list[str]:
    """The table every command prints for a check, its notes and its closing line.

    Without ``verbose`` the per-rewrite rows are summed up by ``groups[label]`` (e.g. the
    op rewritten; else "rewrites"), one line per group; failures are always listed alone.
    """
    head = ["check", "output", "dtype", "shape", "max abs err", "max ulp", "result"]
    rows: list[list[str]] = []
    agg: dict[str, list] = {}
    for r in report.rows:
        if r.label and not verbose and r.ok and r.informative:
            g = agg.setdefault((groups or {}).get(r.label, "rewrites"), [set(), None, None, set()])
            g[0].add(r.label)
            g[1] = larger(g[1], r.max_abs)
            g[2] = larger(g[2], r.max_ulp)
            g[3].add(r.dtype)
            continue
        rows.append([r.label or "whole model", r.output, r.dtype,
                     "?" if r.shape is None else str(r.shape), _err(r.max_abs, r.dtype),
                     "-" if r.max_ulp is None else number(r.max_ulp), r.result])
    summed = [[plural(len(labels), "rewrite") if name == "rewrites" else
               f"{name} ({plural(len(labels), 'rewrite')})", "-", ", ".join(sorted(dts)), "-",
               _err(a, min(dts)), "-" if u is None else number(u), "pass"]
              for name, (labels, a, u, dts) in sorted(agg.items())]
    lines = [f"verify with {describe_policy(report)}:"]
    if rows or summed:
        lines += ["  " + x for x in table(head, summed + rows, right=(4, 5), whole=(3,),
                                               width=screen_width() - 2)]
    lines += [f"  FAIL {r.name}: {r.reason}" for r in report.failures]
    kernels = getattr(report, "kernels", {})
    for source, say, tail in (("function body", "run through their function body", ""),
                              ("onnx.reference", "kernels from onnx.reference",
                               " (the others: opshift's)")):
        names = sorted(k for k, v in kernels.items() if v == source)
        if names:
            lines += wrap(f"  {say}: {', '.join(names)}{tail}")
    lines += [x for n in [*report.notes, *notes] for x in wrap(f"  note: {n}")]
    from opshift.verify.rewritten import group_gaps

    lines += [x for g in group_gaps(report) for x in wrap(f"  not checked: {g}")]
    lines.append(closing_line(report, notes))
    return lines


def closing_line(report, notes: list[str]) -> str:
    """``verify: ok: 3 rewrites and the whole model (1 output) match``, what failed, or what
    was left unchecked."""
    rewrites, whole = counts(report)
    r, w = plural(rewrites, "rewrite"), f"the whole model ({plural(whole, 'output')})"
    checked = (f"{r} and {w}" if rewrites and whole else r if rewrites else w if whole
               else "nothing")
    if report.mismatch:
        bad = report.failures
        first = bad[0]
        return (f"verify: FAIL: {len(bad)} of {plural(len(report.rows), 'compared output')} "
                f"differ; first: {first.name}: {first.reason}")
    if not report.complete:
        gaps = report.gaps
        return (f"verify: incomplete: {checked} checked, {plural(len(gaps), 'thing')} not "
                f"({gaps[0].what}: {gaps[0].why})")
    if not report.rows:
        why = f": {notes[-1]}" if notes else ""
        return f"verify: ok: nothing to check{why}"
    return f"verify: ok: {checked} match" + ("es" if checked == w else "")


def _err(v, dtype: str) -> str:
    if v is None:
        return "-"
    if v == 0:
        return "0"
    try:
        return number(float(v), dtype)
    except TypeError:
        return number(float(v), float)
