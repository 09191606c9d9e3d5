"""Exact opset conversion of a whole model: every scope planned, then written.

For each default-domain node whose schema version differs between its scope's source opset
and the target, the node is walked one version step at a time (:mod:`.walk`). Every node of
every scope -- main graph, If/Loop/Scan bodies, model-local functions (with their own source
opsets, planned once per tuple of input types their call sites pass) -- is planned before
anything is written, so a refusal (:class:`~opshift.errors.ConversionError` naming node,
versions and scope) leaves the model untouched. Then the opset imports and the IR version
(decided here, once) are set. When some node is refused because its op does not exist at the
target, the regions holding such nodes that ``fuse`` fuses exactly into PRelu/LeakyRelu/Selu
are fused first, and the fused model is planned instead (:mod:`.fuse_first`); where nodes
are refused for want of a constant that exact ops compute from constants alone, it is folded
first the same way (:mod:`.fold_first`). A node refused whatever the rest of the model holds
(its op has no form at the target) is refused before any planning (:mod:`.early_refusal`);
initializers the rewrites left without readers are dropped (:mod:`.orphans`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable

import onnx
from onnx import helper

from opshift import opsets, progress
from opshift.convert.bodies import body_refusal
from opshift.convert.early_refusal import refuse_early
from opshift.convert.ir_version import initializers_as_inputs
from opshift.convert.orphans import drop_orphaned_initializers, read_initializers
from opshift.convert.rescue.fuse_first import Refusals, plan_after_fusing_and_folding
from opshift.convert.result import (
    RELABEL,
    Change,
    ConvertResult,
    Relabels,
    all_changes,
    record_region,
    replacement,
    versions,
)
from opshift.convert.step import Context
from opshift.convert.walk import Walk, walk_for, walk_node
from opshift.errors import (
    ArgumentTypeError,
    ConversionError,
    OpshiftError,
    function_id,
)
from opshift.graph.edit import Edits
from opshift.graph.facts import Facts
from opshift.graph.ir_versions import (
    ANNOTATIONS_IR,
    converted_ir,
    drop_annotations,
    dropped_note,
    moved_note,
    node_metadata_to_model,
)
from opshift.graph.scopes import Scope, subgraphs
from opshift.memory import no_cyclic_gc


def check_target(target: int) -> None:
    if not isinstance(target, int) or isinstance(target, bool):
        raise ArgumentTypeError(f"opset must be an int, got {type(target).__name__} "
                                f"{target!r}")
    if not 1 <= target <= opsets.MAX_OPSET:
        raise OpshiftError(f"target opset {target!r} is outside 1..{opsets.MAX_OPSET} "
                           f"(the installed onnx {onnx.__version__})")


def _scope_source(scope: Scope, source: int, model_opset: int | None) -> int:
    """``source`` for the model's own scopes; a function's own import (also inside its
    subgraphs) where it differs from the model's."""
    v = scope.opsets.get("")
    return v if v is not None and v != model_opset else source


_COUNT_EVERY = 256  # nodes per progress update


class _Planner:
    """Plans every node of every scope into :class:`Edits`, then writes them."""

    def __init__(self, model: onnx.ModelProto, source: int, target: int, skip: frozenset[str],
                 record: bool, base_dir, facts: Facts, *, collect_refused: bool = False):
        self.ctx = Context(model, target, facts, Edits(facts))
        #: with ``collect_refused``, the refusals, collected in order instead of raised: the
        #: first is raised once all is planned, or when fusing or folding first may help,
        #: all are (:class:`Refusals`)
        self.refused: list[tuple] | None = [] if collect_refused else None
        self.source = source
        self.skip = skip
        self.record = record
        self.base_dir = base_dir
        #: Changes in scope and node order; relabels as (node, op, scope, from, to) tuples
        self.entries: list = []

    @no_cyclic_gc()  # a plan makes objects per node, none in cycles worth a pass
    def run(self) -> list:
        facts = self.ctx.facts
        scopes = facts.scopes()
        model_opset = opsets.opset_of(self.ctx.model)
        with progress.stage("convert", sum(len(sc.nodes) for sc in scopes), "nodes"):
            for sc in scopes:
                progress.advance(len(sc.nodes) - self._plan_scope(sc, model_opset))
        if self.refused:
            if any(Refusals.may_help(r[-1]) for r in self.refused):
                raise Refusals(self.refused, scopes)
            raise self.refused[0][-1]
        self.ctx.edits.write()
        return self.entries

    def _plan_scope(self, sc: Scope, model_opset: int | None) -> int:
        """Plan the nodes of ``sc``; returns how many of them it counted as done."""
        facts = self.ctx.facts
        target = self.ctx.target
        src = _scope_source(sc, self.source, model_opset)
        if src == target:
            return 0
        if target < src and any(dom not in ("", "ai.onnx") for _, dom in sc.kinds):
            self._check_bodies(sc)
        walks: dict[str, tuple[Walk, bool]] = {}
        for op, dom in sc.kinds:
            walk = self._walk(op, src) if dom in ("", "ai.onnx") else None
            if walk is not None:
                walks[op] = (walk, walk.inert(facts))
        if all(inert for _, inert in walks.values()):
            if walks:  # every node of the scope is relabelled: listed when asked for
                self.entries.append(Relabels(sc, {op: w for op, (w, _) in walks.items()}))
            return 0
        f = sc.root.function
        variants = facts.function_variants(f) if f is not None else None
        counted = 0
        for i, n in enumerate(sc.nodes):
            if i - counted == _COUNT_EVERY:  # a call per node would show in 1M-node runs
                progress.advance(_COUNT_EVERY)
                counted = i
            known = walks.get(n.op_type)
            if known is None:
                continue
            dom = n.domain
            if dom and dom != "ai.onnx":
                continue
            walk, inert = known
            name = n.name or f"<{n.op_type} #{i}>"
            if inert:
                self.entries.append((name, n.op_type, sc.label, walk.v_from, walk.v_to))
                continue
            try:
                if f is None:
                    self._plan(sc, i, n, src, walk, name)
                else:
                    self._plan_in_function(sc, i, n, src, walk, name, f, variants)
            except ConversionError as e:
                self._refused(e, (n, name, sc.label, walk.v_from))
            except Exception:
                if self.refused:  # planning on after a refusal: the refusal it is
                    raise self.refused[0][-1] from None
                raise
        return counted

    def _check_bodies(self, sc: Scope) -> None:
        """Refuse going down under an other-domain node whose schema body no longer fits
        (:mod:`.bodies`): its first node of each such op, with its input types."""
        facts, seen = self.ctx.facts, set()
        for i, n in enumerate(sc.nodes):
            dom = opsets.normalize_domain(n.domain)
            if not dom or (dom, n.op_type) in seen:
                continue
            seen.add((dom, n.op_type))
            opset = sc.opsets.get(dom)
            types = [helper.make_tensor_type_proto(facts.elem_type(x) or 0, facts.shape(x))
                     if x else onnx.TypeProto() for x in n.input]
            why = body_refusal(n, opset, types, self.ctx.target) if opset else None
            if why:
                name = n.name or f"<{n.op_type} #{i}>"
                version = opsets.since_version(n.op_type, opset, dom)
                self._refused(ConversionError(
                    f"node {name!r} ({dom}::{n.op_type}-{version}, {sc.label}): {why}"),
                    (n, name, sc.label, version))

    def _refused(self, e: ConversionError, node: tuple) -> None:
        """Raise ``e``, or when collecting, keep it with its node (node, name, scope label,
        version) and plan on."""
        if self.refused is None:
            raise e
        self.refused.append((*node, e))

    def _walk(self, op: str, src: int) -> Walk | None:
        v_from = opsets.since_version(op, src)
        v_to = opsets.since_version(op, self.ctx.target)
        if op in self.skip or v_from == v_to:
            return None
        if v_from is None:  # the op does not exist at the source: walk_node words it
            return Walk(op, v_from, v_to, ())
        return walk_for(self.ctx.facts, op, v_from, v_to)

    def _plan_one(self, sc: Scope, i: int, n: onnx.NodeProto, src: int, walk: Walk,
                  name: str) -> tuple[list[onnx.NodeProto] | None, Change | tuple, object]:
        """A node's replacement, its entry (a Change, or a relabel's tuple) and its plan."""
        new, state = walk_node(self.ctx, sc, i, n, src, walk.v_from, walk.v_to, name,
                               walk=walk)
        notes = state.notes
        if new is None and not notes:
            return None, (name, n.op_type, sc.label, walk.v_from, walk.v_to), state
        # interned: thousands of nodes of one op often get the same words
        if len(notes) == 1:
            what, why = notes[0]
            what, why = sys.intern(what) or "relabel", sys.intern(why)
        else:
            whys = [y for _, y in notes if y]
            what = sys.intern("; ".join([w for w, _ in notes])) or "relabel"
            why = sys.intern("; ".join(whys)) or ("" if notes else RELABEL)
        change = Change(name, n.op_type, sc.label, walk.v_from, walk.v_to,
                        "rewrite" if new is not None else "relabel", what, why,
                        into=replacement(n, new, self.ctx.target)
                        if new is not None and state.removed else None)
        # a node holding subgraphs gets them written after this plan (their own edits in):
        # its rewrite is checked with the whole model only
        if self.record and not any(True for _ in subgraphs(n)):
            dims = {id(c.tensor): s for c, s in state.pending.dims}
            change.region = record_region(self.ctx.facts, sc, n, new if new is not None
                                          else [n], dims, self.ctx.target, self.base_dir)
        return new, change, state

    def _accept(self, sc: Scope, i: int, new, change: Change | tuple, state) -> None:
        self.ctx.edits.commit(state.pending)
        if new is not None:
            self.ctx.edits.replace(sc, i, new)
        self.entries.append(change)

    def _plan(self, sc: Scope, i: int, n: onnx.NodeProto, src: int, walk: Walk,
              name: str) -> None:
        self._accept(sc, i, *self._plan_one(sc, i, n, src, walk, name))

    def _plan_in_function(self, sc: Scope, i: int, n: onnx.NodeProto, src: int, walk: Walk,
                          name: str, f: onnx.FunctionProto, variants: list) -> None:
        """Plan a node of a function body once per tuple of input types its call sites
        pass; the node is converted only when every tuple gives the same result."""
        facts = self.ctx.facts
        fid = function_id(f)
        if not variants:
            facts.enter_function(f, {})
            try:
                planned = self._plan_one(sc, i, n, src, walk, name)
            except ConversionError as e:
                raise type(e)(f"{e} (function {fid} is never called from the model's "
                              "graphs, so the types of its inputs are unknown)") from None
            finally:
                facts.enter_function(None, None)
            self._accept(sc, i, *planned)
            return
        first = None
        first_ins: tuple[int, ...] = ()
        try:
            for ins, types in variants:
                facts.enter_function(f, types)
                try:
                    planned = self._plan_one(sc, i, n, src, walk, name)
                except ConversionError as e:
                    more = (f" (one of {len(variants)} call-site type combinations)"
                            if len(variants) > 1 else "")
                    raise type(e)(f"{e}; function {fid} called with inputs "
                                  f"{_types_str(ins, f)}{more}") from None
                if first is None:
                    first, first_ins = planned, ins
                elif _canonical(planned[0], n) != _canonical(first[0], n):
                    raise ConversionError(
                        f"node {name!r} ("
                        f"{versions(n.op_type, walk.v_from, walk.v_to, self.ctx.target)}, "
                        f"{sc.label}): function {fid} is called with inputs "
                        f"{_types_str(first_ins, f)} and {_types_str(ins, f)}, which need "
                        "different conversions of this node")
        finally:
            facts.enter_function(None, None)
        self._accept(sc, i, *first)


def _types_str(ins: tuple[int, ...], f: onnx.FunctionProto) -> str:
    return "(" + ", ".join(f"{x}: {opsets.tensor_type_name(t) if t else 'unknown'}"
                           for x, t in zip(f.input, ins)) + ")"


def _canonical(nodes: list[onnx.NodeProto] | None, orig: onnx.NodeProto) -> list | None:
    """``nodes`` with fresh value names numbered in order and node names left out."""
    if nodes is None:
        return None
    keep = {*orig.input, *orig.output}
    names: dict[str, str] = {}

    def ren(v: str) -> str:
        return v if not v or v in keep else names.setdefault(v, f"#{len(names)}")

    out = []
    for b in nodes:
        attrs = []
        for a in b.attribute:
            c = onnx.AttributeProto()
            c.CopyFrom(a)
            if c.HasField("t"):
                c.t.name = ""
            attrs.append(c.SerializeToString(deterministic=True))
        out.append((b.op_type, b.domain, [ren(v) for v in b.input],
                    [ren(v) for v in b.output], attrs))
    return out


def convert_nodes(model: onnx.ModelProto, source: int, target: int, *,
                  skip: Iterable[str] = ()) -> list[Change]:
    """Convert every default-domain node (whose op is not in ``skip``) from ``source`` (each
    function's own import where it has one) to ``target``, in place; return what changed.

    Leaves the opset imports and the IR version alone (new initializers are not listed as
    graph inputs). Raises :class:`ConversionError` naming op, node, scope and versions when
    a node cannot be converted exactly; the model is then unchanged.
    """
    return all_changes(_Planner(model, source, target, frozenset(skip), False, None,
                                Facts(model, source)).run())


def convert_proto(model: onnx.ModelProto, target: int, *,
                  verbose_log: Callable[[str], None] | None = None, record: bool = False,
                  base_dir=None, facts: Facts | None = None,
                  keep_node_metadata: bool = False) -> ConvertResult:
    """Convert ``model`` to default-domain opset ``target`` in place.

    ``verbose_log(msg)`` (optional) is called with one line per decision. ``record`` keeps
    copies of each rewritten node and its replacement on the changes (for ``--verify``;
    ``base_dir``: where the model's external data is). A node whose op does not exist at
    the target, in a region ``fuse`` fuses exactly into PRelu/LeakyRelu/Selu (their function
    bodies written out), is fused first: that region only, reported as a change with action
    ``"fuse"``. ``facts``: a :class:`~opshift.graph.facts.Facts` of ``model`` as it is (one
    reading the index of :func:`opshift.check.structure.check`'s walk, which it then need not
    walk again); planning ``model`` reads it. ``keep_node_metadata``: where the IR version
    goes below the one that defines node metadata, move it into the model's
    ``metadata_props`` (:func:`opshift.graph.ir_versions.node_metadata_to_model`) rather than drop
    it. Raises :class:`ConversionError` naming the node when a rewrite cannot be exact; the
    model is then unchanged.
    """
    check_target(target)
    source = opsets.opset_of(model)
    if source is None:
        raise ConversionError("the model does not import the default (ai.onnx) domain; "
                              "nothing to convert")
    ir_before = model.ir_version
    result = ConvertResult(source, target, ir_version=(ir_before, ir_before))
    log = verbose_log or (lambda _msg: None)
    if source == target and all(opsets.opset_of(f) in (None, target) for f in model.functions):
        log(f"model is already at opset {target}: nothing to do")
        return result
    if facts is None:
        facts = Facts(model, source)
    refuse_early(facts, target)  # (before the cost of planning)
    read_before = read_initializers(model.graph, facts)
    result.entries, result.fused_regions = plan_after_fusing_and_folding(
        model, lambda m: _Planner(m, source, target, frozenset(), record, base_dir,
                                  facts if m is model else Facts(m, source),
                                  collect_refused=True).run(),
        source, target, record=record, base_dir=base_dir)
    if verbose_log is not None:
        for c in all_changes(result.entries):
            log(f"{c.scope}: {c.node} ({c.label}): {c.what} -- {c.why}")
    # (only a rewrite stops reading a constant: relabels leave every read as it was)
    orphaned = drop_orphaned_initializers(model.graph, read_before) if any(
        isinstance(e, Change) and e.action != "relabel" for e in result.entries) else []
    if orphaned:
        shown = ", ".join(repr(n) for n in orphaned[:5])
        more = f" and {len(orphaned) - 5} more" if len(orphaned) > 5 else ""
        result.notes.append(f"dropped {len(orphaned)} initializer(s) the rewrites left "
                            f"without readers: {shown}{more}")
        log(result.notes[-1])
    ir = converted_ir(model, source, target, ir_before)
    _set_opsets(model, target)
    model.ir_version = ir
    # (only a lower IR drops what it does not define: a field the model declared at its own
    # IR is the author's, which fix repairs)
    if keep_node_metadata and ir < ir_before and ir_before >= ANNOTATIONS_IR:
        moved = node_metadata_to_model(model, ir)
        if moved[0]:
            result.notes.append(moved_note(*moved, ir))
            log(result.notes[-1])
    dropped = drop_annotations(model, ir) if ir < ir_before and \
        ir_before >= ANNOTATIONS_IR else {}
    if dropped:
        result.notes.append(dropped_note(dropped, ir))
        log(result.notes[-1])
    if ir < 4:
        initializers_as_inputs(model)
    result.ir_version = (ir_before, ir)
    if ir_before != ir:
        log(f"IR version {ir_before} -> {ir}")
    return result


def _set_opsets(model: onnx.ModelProto, target: int) -> None:
    for imp in model.opset_import:
        if opsets.normalize_domain(imp.domain) == "":
            imp.version = target
    for f in model.functions:
        for imp in f.opset_import:
            if opsets.normalize_domain(imp.domain) == "":
                imp.version = target
