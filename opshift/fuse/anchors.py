"""The ops of which every fuse rule's pattern holds at least one.

A model with none of them has nothing to fuse and nothing to refuse, which ``opshift fuse``
knows from the model's op types alone, before building the rules and the IR (loading
onnxscript and onnx_ir takes longer than the rest of fusing a model with nothing to fuse).
The finer check, which needs the rules, is :func:`opshift.fuse.engine.may_match`; the
tests check that every rule's ops meet these.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Mul: every decomposed form scales by a slope, alpha or gamma; Cast: the rules that fold a
#: Cast around an activation into it.
ANCHORS = frozenset({"Mul", "Cast"})


def may_hold_patterns(ops: Iterable[str]) -> bool:
    """Whether a model whose op types (of any domain) are ``ops`` may hold a pattern some
    fuse rule matches."""
    return not ANCHORS.isdisjoint(ops)
