"""The one table of what the evaluator supports: (domain, op) -> {since_version: impl}.

An implementation is registered for the schema versions whose meaning it implements::

    @op("PRelu", 1, 6)
    def prelu_legacy(ctx, x, slope): ...

The runtime picks the schema in force at the node's opset (``onnx.defs.get_schema``) and
looks up its ``since_version`` here, so a version nobody registered is an error, never a
silent fallback to a neighbour with a different meaning.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Impl = Callable[..., Any]

_REGISTRY: dict[tuple[str, str], dict[int, Impl]] = {}
_ABSENT: dict[tuple[str, str, int], frozenset[int]] = {}


def op(name: str, *versions: int, domain: str = "",
       absent: tuple[int, ...] = ()) -> Callable[[Impl], Impl]:
    """Register the decorated function for ``name`` at each schema version in ``versions``.
    ``absent``: positions of inputs the schema requires that the kernel runs without (as
    models in use leave out Resize-11's roi); any other required input left out is an
    error before the kernel runs."""
    if not versions:
        raise ValueError(f"op({name!r}) needs at least one version")

    def deco(fn: Impl) -> Impl:
        table = _REGISTRY.setdefault((domain, name), {})
        for v in versions:
            if v in table:
                raise ValueError(f"{domain}::{name}-{v} registered twice")
            table[v] = fn
            if absent:
                _ABSENT[(domain, name, v)] = frozenset(absent)
        return fn

    return deco


def lookup(domain: str, name: str, version: int) -> Impl | None:
    return _REGISTRY.get((domain, name), {}).get(version)


def absent_ok(domain: str, name: str, version: int) -> frozenset[int]:
    """Required inputs the registered kernel runs without (see :func:`op`)."""
    return _ABSENT.get((domain, name, version), frozenset())


def supported() -> dict[tuple[str, str], tuple[int, ...]]:
    """(domain, op) -> the schema versions the evaluator implements, sorted."""
    load_all()
    return {k: tuple(sorted(v)) for k, v in sorted(_REGISTRY.items())}


def load_all() -> None:
    """Import every op module (each registers its kernels) the first time it is called."""
    global _loaded
    if not _loaded:
        from opshift.evaluator import ops  # noqa: F401

        _loaded = True


_loaded = False
