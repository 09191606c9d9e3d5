"""Names that passes/inline.py and passes/decompose.py import from here; they live in
:mod:`opshift.graph` and :mod:`opshift.passes.ir_pass`. (Kept while those two modules are
being rewritten elsewhere; remove once they import from there.)"""

from ..graph.facts import static_shapes
from ..graph.names import Names, claimable
from ..graph.scopes import node_kinds, subgraphs
from ..graph.tensors import tensor_array
from .ir_pass import lazy_attribute, run_as_ir_pass

__all__ = ["Names", "claimable", "lazy_attribute", "node_kinds", "run_as_ir_pass",
           "static_shapes", "subgraphs", "tensor_array"]
