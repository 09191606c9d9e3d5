"""Checking that two models compute the same thing, with the bundled evaluator as the oracle.

* :func:`verify` runs a reference and a candidate model on the same inputs and compares every
  output (matched by position; a different name, count, dtype or shape is a failure).
* :func:`make_inputs` generates inputs from a graph's declared types and shapes: random normal
  values with special values mixed in (see :func:`special_values`).
* :func:`compare` is the comparison policy (see :data:`ULP_TOLERANCE`).
* :func:`region_model` and :func:`verify_rewrites` let a pass check each rewrite locally: a
  small model around the nodes before the rewrite and one around the nodes after it.
* :func:`evaluator_supports` says whether the evaluator can run a model at all.

Each concern has its module: :mod:`.comparison` (the policy, with the module docs on what
counts as equal), :mod:`.inputs` (generated inputs), :mod:`.report` (:class:`VerifyReport`),
:mod:`.region` (:func:`region_model`) and :mod:`.policy` (tolerance and backend options in
force); :mod:`.verifier` runs the models and pairs their outputs.

This ``__init__`` imports none of them: ``opshift.verify`` is imported with ``opshift``, and a
command that checks nothing (convert, fix, inspect without ``--verify``) should not pay for
them. The names above are looked up in :mod:`.verifier` on first use (:func:`__getattr__`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

__all__ = [
    "DEFAULT_DIM", "ULP_TOLERANCE", "Comparison", "Gap", "Rewrite", "Row", "VerifyReport",
    "check_in_context", "check_rewrites", "compare", "evaluator_supports", "make_inputs",
    "region_inputs", "region_key", "region_model", "special_values", "verify",
    "verify_rewrites",
]


def verify(reference: Any, candidate: Any, inputs: Mapping[str, Any] | None = None, *,
           dims: Mapping[str, int] | None = None, seed: int = 0,
           signed_zeros: bool = True, finite: Collection[str] = (),
           rewritten: bool = False, capture: Collection[str] = ()) -> Any:
    """Run both models through the evaluator on the same inputs and compare every output:
    a :class:`~opshift.verify.report.VerifyReport`; see :func:`.verifier.verify`."""
    from opshift.verify.verifier import verify as run

    return run(reference, candidate, inputs, dims=dims, seed=seed, signed_zeros=signed_zeros,
               finite=finite, rewritten=rewritten, capture=capture)


def __getattr__(name: str) -> Any:
    """The other names of ``__all__``, from :mod:`.verifier` (imported here, on first use)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from opshift.verify import verifier

    return getattr(verifier, name)
