"""What the ``onnx_ir`` pass adapters share: run a ``ModelProto`` core on a serialized copy
of an ``onnx_ir.Model`` and hand the result back in the same object."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx


def replace_ir_model(model, new) -> None:
    """Make ``model`` (the ``onnx_ir.Model`` a pass manager holds) become ``new`` in place:
    the ``onnx_ir`` passes convert a serialized copy and must hand back the same object."""
    for cls in type(model).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if slot != "__weakref__" and hasattr(new, slot):
                setattr(model, slot, getattr(new, slot))
    if hasattr(new, "__dict__"):
        model.__dict__.update(new.__dict__)


def lazy_attribute(namespace: dict[str, Any], name: str, make: Callable[[], Any]
                   ) -> Callable[[str], Any]:
    """A module ``__getattr__`` that makes ``name`` with ``make()`` on first use and keeps it
    in ``namespace`` (the module's globals). The pass adapters are built this way so that
    importing a pass module (the CLI does) does not import onnx_ir, which imports sympy."""

    def __getattr__(attr: str) -> Any:
        if attr != name:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {attr!r}")
        value = namespace[name] = make()
        return value

    return __getattr__


def run_as_ir_pass(model, run: Callable[[onnx.ModelProto], Any],
                   replace: Callable[[Any, Any], None] = replace_ir_model) -> tuple[Any, Any]:
    """The body of opshift's ``onnx_ir`` pass adapters: serialize ``model``, ``run`` the
    ModelProto core on the copy, and when its result says it modified it, make ``model``
    hold the result (``replace``). Returns (the core's result, the ``PassResult``)."""
    import onnx_ir as ir
    from onnx_ir.passes import PassResult

    proto = ir.serde.serialize_model(model)
    result = run(proto)
    if result.modified:
        replace(model, ir.serde.deserialize_model(proto))
    return result, PassResult(model, modified=bool(result.modified))
