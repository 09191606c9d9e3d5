"""onnx-graphsurgeon plugin: ``import opshift.plugins.graphsurgeon`` registers graph methods.

::

    import onnx, onnx_graphsurgeon as gs
    import opshift.plugins.graphsurgeon  # noqa: F401  (registers the methods)

    graph = gs.import_onnx(onnx.load("model.onnx"))
    graph.opshift_fix().opshift_convert(13).cleanup().toposort()
    onnx.save(gs.export_onnx(graph), "model13.onnx")

Registered through ``gs.Graph.register()`` (for every opset):

* ``graph.opshift_convert(opset)`` -- :func:`opshift.convert`
* ``graph.opshift_inline(ops=None, functions=None, *, allow_nonfinite_slope=False)`` --
  :func:`opshift.inline`
* ``graph.opshift_fuse(allow_rounding=False)`` -- :func:`opshift.fuse`
* ``graph.opshift_fix(prelu_slope=None)`` -- :func:`opshift.fix`

Each exports the graph (``gs.export_onnx``), runs the opshift function on the model, imports
the result (``gs.import_onnx``) and **updates the graph in place**, returning ``self`` so
calls chain like graphsurgeon's own ``cleanup()`` and ``toposort()``. Because the graph's
contents are replaced, ``Node`` and ``Tensor`` objects obtained from it before the call belong
to the old contents: look them up again afterwards (``graph.tensors()``). The result of the
last call (``ConvertResult``, ``InlineResult``, ``FixResult``, ...) is kept in
``graph.opshift_result`` when the function provides one. If the opshift function raises,
the graph is left unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import onnx
import onnx_graphsurgeon as gs

from opshift.errors import OpshiftError

__all__ = ["opshift_convert", "opshift_inline", "opshift_fuse", "opshift_fix"]


def _export(graph: gs.Graph) -> onnx.ModelProto:
    try:
        return gs.export_onnx(graph, do_type_check=False)
    except Exception as e:  # graphsurgeon raises plain exceptions for unexportable graphs
        raise OpshiftError(f"graph {graph.name!r}: onnx-graphsurgeon could not export it: "
                           f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                           ) from e


def _become(graph: gs.Graph, new: gs.Graph) -> None:
    """Make ``graph`` hold ``new``'s nodes, tensors, functions and model fields."""
    state = dict(new.__dict__)
    graph.__dict__.clear()
    graph.__dict__.update(state)


def _roundtrip(graph: gs.Graph, run: Callable[[onnx.ModelProto], tuple[onnx.ModelProto, Any]]
               ) -> gs.Graph:
    model = _export(graph)
    new_model, result = run(model)
    new = gs.import_onnx(new_model)
    _become(graph, new)
    graph.opshift_result = result
    return graph


@gs.Graph.register()
def opshift_convert(self: gs.Graph, opset: int) -> gs.Graph:
    """Convert the graph to default-domain ``opset`` exactly (see :func:`opshift.convert`).
    Updates the graph in place and returns it."""
    from opshift.convert.engine import convert_proto

    def run(model):
        result = convert_proto(model, opset)
        return model, result

    return _roundtrip(self, run)


@gs.Graph.register()
def opshift_inline(self: gs.Graph, ops=None, functions=None, *,
                   allow_nonfinite_slope: bool = False) -> gs.Graph:
    """Inline PRelu/LeakyRelu/Selu (``ops``) and model-local ``functions`` (see
    :func:`opshift.inline`, also for ``allow_nonfinite_slope``). Updates the graph in place
    and returns it."""
    from opshift.inline.inliner import inline_proto

    def run(model):
        result = inline_proto(model, ops, functions,
                              allow_nonfinite_slope=allow_nonfinite_slope)
        return model, result

    return _roundtrip(self, run)


@gs.Graph.register()
def opshift_fuse(self: gs.Graph, allow_rounding: bool = False) -> gs.Graph:
    """Fuse decomposed PRelu/LeakyRelu/Selu patterns back into single ops where exact (see
    :func:`opshift.fuse`). Updates the graph in place and returns it."""
    from opshift.fuse.driver import fuse_proto

    def run(model):
        return fuse_proto(model, allow_rounding=allow_rounding)

    return _roundtrip(self, run)


@gs.Graph.register()
def opshift_fix(self: gs.Graph, prelu_slope: str | None = None) -> gs.Graph:
    """Repair runtime-breaking defects without changing the opset (see :func:`opshift.fix`);
    ``graph.opshift_result`` holds the :class:`~opshift.fix.report.FixResult`. Updates the
    graph in place and returns it."""
    from opshift.fix.fixer import fix_proto

    def run(model):
        result = fix_proto(model, prelu_slope=prelu_slope)
        return model, result

    return _roundtrip(self, run)
