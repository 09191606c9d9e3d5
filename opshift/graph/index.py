"""The model index: the record of the one walk over a model.

The structural check (:mod:`opshift.check.structure`) fills a :class:`ModelIndex` as it
walks the model (scopes with their activation sites, names, producers' op kinds, the main
graph's declared entries and uses, element types); :class:`~opshift.graph.facts.Facts` reads
it, so that no pass walks the model again. Passes and commands ask Facts, not the index."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import onnx
from onnx.external_data_helper import uses_external_data

from opshift.graph.declared import Listed


@dataclass
class IndexScope:
    """One node list of the model: a graph (main or subgraph) or a model-local function."""

    owner: onnx.GraphProto | onnx.FunctionProto
    label: str  # "graph 'g'", "graph 'g'/node 'if'/then_branch", "function dom::name"
    opsets: dict[str, int]
    function: onnx.FunctionProto | None  # the function the scope is (or is nested) in
    #: the activations: (index, node, op, name, inputs, outputs), read once by the walk
    sites: list[tuple[int, onnx.NodeProto, str, str, list[str], list[str]]] = field(
        default_factory=list)


@dataclass
class ModelIndex:
    """The one walk's index of a model (the structural check fills it, Facts reads it):
    every scope in pre-order with its PRelu/LeakyRelu/Selu nodes, and every name in use
    (values, node names, graph and function inputs); with ``facts``, what
    :class:`~opshift.graph.facts.Facts` reads of the main graph. Valid while the model is
    not edited (and for an unedited copy of it: but for the scopes, it holds names and
    counts only)."""

    names: set[str] = field(default_factory=set)
    scopes: list[IndexScope] = field(default_factory=list)
    external: bool = False  # some tensor lives in external data (see modelio)
    #: (domain, op_type) of the nodes anywhere in the model; filled in both modes
    kinds: set[tuple[str, str]] = field(default_factory=set)
    #: below opset 15 (where inline needs X's type): the main graph's declared and
    #: propagated element types with the functions' typed variants, an
    #: :class:`opshift.graph.element_types.Typed` made by the one propagation
    #: (:class:`~opshift.graph.element_types.Propagation`) fed by the walk; else empty
    types: dict[str, int] = field(default_factory=dict)
    #: False: fill only ``external``, ``kinds`` and ``found`` (and ``names`` with
    #: ``keep_names``), for a caller that needs nothing else
    full: bool = True
    #: keep ``names`` without ``full`` (for a caller that makes fresh names: fix); the set
    #: is the walk's own, kept rather than copied
    keep_names: bool = False
    #: True: also keep what :class:`~opshift.graph.facts.Facts` reads of the main graph
    #: (``declared``, ``reads``), in either mode
    facts: bool = False
    #: with ``facts``: the names of the main graph's entries
    declared: Listed | None = None
    #: with ``facts``: every name the main graph's nodes (and the nodes of the subgraphs
    #: :func:`~opshift.graph.scopes.iter_scopes` lists under it) read, and the names those
    #: graphs output, one per read; counted by :meth:`uses`
    reads: list[str] | None = None
    _uses: Counter | None = field(default=None, repr=False)
    #: the kinds of problem the walk found (:func:`opshift.check.structure.problems`; slope
    #: problems only when not skipped): a defect of another kind is not in the model
    found: set[str] = field(default_factory=set)

    def forget_reading(self) -> None:
        """Drop what describes the model's values and nodes (it was rewritten: the index
        describes it no more), which would otherwise stay in memory while it is written;
        ``external`` and ``kinds`` stay."""
        self.declared = self.reads = self._uses = None
        self.names, self.scopes, self.types = set(), [], {}

    @property
    def naming(self) -> bool:
        """Whether the walk fills :attr:`names`."""
        return self.full or self.keep_names

    def add_names(self, names: set[str]) -> None:
        """Add ``names`` (a set the walk is done with: it may become :attr:`names`) to
        :attr:`names`; the larger set takes in the smaller, so the main graph's names are
        not copied."""
        if len(names) > len(self.names):
            names |= self.names
            self.names = names
        else:
            self.names |= names

    def uses(self) -> Counter | None:
        """How many reads (``reads``) each name of the main graph's tree has; None without
        ``facts``. Counted once; the counts are shared, and nobody may change them."""
        if self._uses is None and self.reads is not None:
            self._uses = Counter(self.reads)
            self.reads = None
        return self._uses


def holds_external_data(n: onnx.NodeProto) -> bool:
    """A tensor attribute of ``n`` lives in external data (subgraphs are walked on their
    own)."""
    for a in n.attribute:
        if a.type == onnx.AttributeProto.TENSOR and uses_external_data(a.t):
            return True
        if a.type == onnx.AttributeProto.TENSORS and any(map(uses_external_data, a.tensors)):
            return True
    return False
