"""Recording fusions and refusals while onnxscript's rewriter runs our rules.

The rewriter reports a refused match only to a tracer (and a tracer stops it from
rewriting), so the rules record their own decisions into the :class:`Recorder` of the run
that made them (:func:`opshift.fuse.rules.rules`). Without one (plain
``onnxscript.rewriter.rewrite``) nothing is recorded.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import onnx_ir as ir
from onnxscript.rewriter import RewriteRule, _matcher

from opshift.graph.names import Names

USED_OUTSIDE = ("a value computed inside the pattern is used outside it or is a graph output; "
                "fusing would remove it")


@dataclass
class Event:
    rule: str
    node: str  # name of the pattern's anchor (last) node
    op: str  # op type of the anchor node
    detail: str  # produced op, or the reason for refusing
    where: str = ""  # graph / function label
    matched: tuple[str, ...] = ()  # a fusion's matched nodes' op types
    tags: tuple = ()  # a fusion's tags of the ``Recorder.only`` nodes among them
    zero_sign: str = ""  # a fusion's difference from the pattern in the sign of zero


def inline_prefix(anchor: ir.Node, matched: tuple[ir.Node, ...]) -> str | None:
    """``<name>`` when ``matched`` are named as ``opshift inline`` names the nodes it writes
    for a node ``<name>``: every one ``<name>/...``, the anchor ``<name>/Y`` (or ``Y_1``
    ...); else None."""
    prefix, sep, last = (anchor.name or "").rpartition("/")
    if not (sep and prefix and (last == "Y" or (last[:2] == "Y_" and last[2:].isdigit()))):
        return None
    if not all((n.name or "").startswith(prefix + "/") for n in matched):
        return None
    return prefix


@dataclass
class Recorder:
    fused: list[Event] = field(default_factory=list)
    refused: list[Event] = field(default_factory=list)
    cleanup: list[ir.Node] = field(default_factory=list)  # constant producers maybe now unused
    initializers: list[ir.Value] = field(default_factory=list)  # read by fused nodes
    capture: bool = False  # keep (label, before, after) region models for --verify
    regions: list = field(default_factory=list)
    pending: object = None
    scope_labels: dict[int, str] = field(default_factory=dict)  # id(graph) -> label
    #: id(node) -> tag: only matches holding one of these nodes are fused (None: all)
    only: dict[int, object] | None = None
    _anchors: list[tuple[ir.Node, Event]] = field(default_factory=list)
    _seen: set[tuple[int, str]] = field(default_factory=set)
    _names: Names | None = None  # every value name of the model, gathered when needed
    _node_names: Counter | None = None  # every node name of the model, gathered when needed
    _made: dict[int, int] = field(default_factory=dict)  # id(fused node) -> its event's index
    _region_of: dict[int, int] = field(default_factory=dict)  # event index -> region index

    def fresh_value_name(self, model: ir.Model, base: str) -> str:
        """``base`` (or ``base_1``, ...) if no value anywhere in ``model`` has that name."""
        if self._names is None:
            self._names = Names.from_used(_value_names(model))
        return self._names.fresh(base)

    def inlined_name(self, model: ir.Model, anchor: ir.Node,
                     matched: tuple[ir.Node, ...]) -> str | None:
        """The name of the node ``opshift inline`` replaced by ``matched``, when they are what
        it wrote: every node named ``<name>/...``, the anchor ``<name>/Y`` (or ``Y_1`` ...),
        and no node of ``model`` called ``<name>``; the fused node then takes that name
        back (once), instead of its anchor's."""
        prefix = inline_prefix(anchor, matched)
        if prefix is None:
            return None
        if self._node_names is None:
            self._node_names = Counter(_node_names(model))
        if self._node_names[prefix]:
            return None
        self._node_names[prefix] += 1
        return prefix

    def selected(self, nodes) -> bool:
        """Whether a match of ``nodes`` may be fused (see :attr:`only`)."""
        return self.only is None or any(id(n) in self.only for n in nodes)

    def refuse(self, rule: str, node: ir.Node, reason: str) -> None:
        key = (id(node), reason)
        if key in self._seen:
            return
        self._seen.add(key)
        ev = Event(rule, node.name or "", node.op_type, reason, self._where(node))
        self._anchors.append((node, ev))

    def fuse(self, rule: str, node: ir.Node, produced: str, made: ir.Node | None = None,
             matched: tuple[ir.Node, ...] = (), zero_sign: str = "") -> None:
        """Record a fusion anchored at ``node`` that made ``made`` of the ``matched`` nodes,
        with its region (:attr:`pending`) when captured. A fusion that swallows a node an
        earlier one made (a float32 op fused from its body, then with its Casts into the
        16-bit op) is one pattern: its event replaces the earlier one's, rules joined by
        '+', and its region is both regions composed (none if either has none)."""
        from opshift.fuse.region import compose

        only = self.only or {}
        ev = Event(rule, node.name or "", node.op_type, produced, self._where(node),
                   tuple(n.op_type for n in matched if id(n) not in self._made),
                   tuple(only[id(n)] for n in matched if id(n) in only), zero_sign)
        region, self.pending = self.pending, None
        earlier = next((self._made.pop(id(n)) for n in matched if id(n) in self._made), None)
        if earlier is None:
            i = len(self.fused)
            self.fused.append(ev)
        else:
            i = earlier
            first = self.fused[i]
            ev.rule = f"{first.rule}+{rule}"
            ev.matched = first.matched + ev.matched
            ev.tags = first.tags + ev.tags
            ev.zero_sign = first.zero_sign or ev.zero_sign
            self.fused[i] = ev
            r = self._region_of.pop(i, None)
            inner = None if r is None else self.regions[r]
            if r is not None:
                self.regions[r] = None
            region = None if inner is None or region is None else compose(inner, region)
        if region is not None:
            self._region_of[i] = len(self.regions)
            self.regions.append(region)
        if made is not None:
            self._made[id(made)] = i

    def _where(self, node: ir.Node) -> str:
        """The label of the graph or function holding ``node``."""
        g = node.graph
        if g is None:
            return ""
        return self.scope_labels.get(id(g)) or g.name or ""

    def finish(self) -> None:
        """Keep refusals whose anchor is still in the graph (not fused by another rule)."""
        for node, ev in self._anchors:
            if node.graph is None:  # removed: another rule fused it
                continue
            self.refused.append(ev)
        self._anchors.clear()


def _node_names(model: ir.Model) -> Iterator[str]:
    """The names of all nodes of ``model``: graphs, subgraphs and functions."""
    graphs = [model.graph, *model.graph.subgraphs()]
    for f in model.functions.values():
        graphs += [f.graph, *f.graph.subgraphs()]
    for g in graphs:
        yield from (n.name for n in g if n.name)


def _value_names(model: ir.Model) -> set[str]:
    """The names of all values of ``model``: graphs, subgraphs and functions."""
    graphs = [model.graph, *model.graph.subgraphs()]
    for f in model.functions.values():
        graphs += [f.graph, *f.graph.subgraphs()]
    names: set[str] = set()
    for g in graphs:
        names.update(v.name for v in g.inputs if v.name)
        names.update(g.initializers)
        for node in g:
            names.update(v.name for v in node.outputs if v.name)
    return names



def _op_of(node_pattern) -> str | None:
    value = getattr(node_pattern.op, "value", None)
    return value() if callable(value) else None


def root_op(pattern) -> str | None:
    """The op type of a single-output pattern's output node (commuted copies included)."""
    if not pattern.has_single_output_node:
        return None
    return _op_of(pattern.output_node)


def skeleton(node_pattern, swapped: frozenset = frozenset(), depth: int = 0) -> tuple:
    """``(op, ((input index, child skeleton), ...))``: the op types a pattern computes, for a
    cheap structural pre-check (inputs that are variables or alternatives are not listed).
    ``swapped``: the binary node patterns whose two inputs the variant exchanges."""
    children = []
    if depth < 8:
        inputs = list(node_pattern.inputs)
        if node_pattern in swapped:
            inputs.reverse()
        for i, v in enumerate(inputs):
            producer = v.producer() if v is not None else None
            if producer is not None and _op_of(producer) is not None:
                children.append((i, skeleton(producer, swapped, depth + 1)))
    return _op_of(node_pattern), tuple(children)


#: The ops whose two inputs ``GraphPattern.commute`` exchanges (onnxscript keeps this set
#: inside the method; tests check that :func:`operand_orders` gives what commute gives).
_COMMUTATIVE = frozenset({("", "Add", ""), ("", "Mul", ""), ("", "And", ""), ("", "Or", ""),
                          ("", "Xor", ""), ("", "BitwiseAnd", ""), ("", "BitwiseOr", ""),
                          ("", "BitwiseXor", ""), ("", "Equal", ""), ("", "Max", ""),
                          ("", "Mean", ""), ("", "Min", ""), ("", "Sum", "")})


def operand_orders(pattern) -> list[tuple[bool, ...]]:
    """The swap lists of ``pattern.commute()``, in its order: one flag per node pattern."""
    import itertools

    return list(itertools.product(*[(False, True) if n.op_identifier() in _COMMUTATIVE
                                    else (False,) for n in pattern]))


def commuted(pattern, swaps: tuple[bool, ...]):
    """The variant of ``pattern`` with the inputs of the flagged nodes exchanged, built as
    ``GraphPattern.commute`` builds each of its variants (but only this one)."""
    from onnxscript.rewriter._pattern_ir import GraphPattern

    if not any(swaps):
        return pattern
    node_map: dict = {}
    inputs = [v.clone(node_map) for v in pattern.inputs]
    nodes = [n.clone(node_map, swap) for n, swap in zip(pattern, swaps)]
    outputs = [v.clone(node_map) for v in pattern.outputs]
    return GraphPattern(inputs, outputs, nodes)


@functools.cache  # (patterns are made once per process, see opshift.fuse.rules.rules)
def operand_skeletons(pattern) -> list[tuple[tuple, tuple[bool, ...]]]:
    """(skeleton, swaps) per operand order of ``pattern``, in :func:`operand_orders`'s
    order."""
    nodes = list(pattern)
    return [(skeleton(pattern.output_node, frozenset(n for n, swap in zip(nodes, swaps) if swap)),
             swaps) for swaps in operand_orders(pattern)]


@functools.cache
def commuted_once(pattern, swaps: tuple[bool, ...]):
    """:func:`commuted`, made once per process: commuting a pattern is most of what building
    a rule costs, and every run's rules share the patterns (nothing matches into them)."""
    return commuted(pattern, swaps)


def skeleton_ops(rule: AnchoredRule) -> frozenset[str]:
    """The op types every operand order of ``rule``'s pattern contains: those of the pattern
    as written (commuting operands reorders a node's inputs, never its producers)."""
    ops: set[str] = set()
    todo = [rule._skeleton]
    while todo:
        op, children = todo.pop()
        ops.add(op)
        todo.extend(child for _, child in children)
    return frozenset(ops)


def fits_skeleton(node: ir.Node, skel: tuple) -> bool:
    op, children = skel
    if node.op_type != op:
        return False
    inputs = node.inputs
    for i, child in children:
        v = inputs[i] if i < len(inputs) else None
        p = v.producer() if v is not None else None
        if p is None or not fits_skeleton(p, child):
            return False
    return True


class AnchoredMatcher(_matcher.SimplePatternMatcher):
    """SimplePatternMatcher that records "used outside" refusals in its rule's recorder."""

    def __init__(self, pattern) -> None:
        super().__init__(pattern)
        self.rule_name = "opshift"
        self.recorder: Recorder | None = None

    def match(self, model, graph_or_function, node, *, verbose=0, remove_nodes=True,
              tracer=None):
        result = super().match(model, graph_or_function, node, verbose=verbose,
                               remove_nodes=remove_nodes, tracer=tracer)
        if not result and result.reason.startswith("Matched nodes have other uses"):
            rec = self.recorder
            if rec is not None and rec.selected([node]):
                rec.refuse(self.rule_name, node, USED_OUTSIDE)
        return result


class AnchoredRule(RewriteRule):
    """One rule, every operand order of its pattern (commuted Add/Mul/Max/Min), each tried
    only on nodes whose op types have the pattern's shape: the rewriter tries every rule at
    every node, so cheap rejection keeps fusion linear and fast. Behaves as the list of its
    commuted variants would, in order. ``recorder``: where the matcher records the matches
    refused for a value used outside them (None: nowhere)."""

    def __init__(self, target_pattern, replacement, condition, *, name: str,
                 recorder: Recorder | None = None) -> None:
        super().__init__(target_pattern, replacement, condition, matcher=AnchoredMatcher,
                         name=name)
        self._matcher.rule_name = name
        self._matcher.recorder = self.recorder = recorder
        self._skeleton = skeleton(self._target_pattern.output_node)
        self._root_op = root_op(self._target_pattern)
        # the ops the root's direct inputs need (a multiset; the same for every operand order)
        self._needs = tuple(Counter(child[0] for _, child in self._skeleton[1]).items())
        self._anchored = (replacement, condition)
        self._commuted: list[list] | None = None

    @property
    def _variants(self) -> list[list]:
        """``[skeleton, swaps, rule or None]`` per operand order, listed when a node first
        gets past the root op and ``_needs`` filters; each variant's rule is built when a node
        first fits its skeleton (:meth:`_variant_rule`)."""
        if self._commuted is None:
            self._commuted = [[skel, swaps, None]
                              for skel, swaps in operand_skeletons(self._target_pattern)]
        return self._commuted

    def _variant_rule(self, entry: list) -> RewriteRule:
        if entry[2] is None:
            rule = RewriteRule(commuted_once(self._target_pattern, entry[1]), *self._anchored,
                               matcher=AnchoredMatcher, name=self.name)
            rule._matcher.rule_name = self.name
            rule._matcher.recorder = self.recorder
            entry[2] = rule
        return entry[2]

    def commute(self):
        return [self]  # already covers every operand order

    def try_rewrite(self, model, graph_or_function, node, *, verbose=None, tracer=None):
        if node.op_type != self._root_op or node.domain not in ("", "ai.onnx") \
                or not self.admits(producer_ops(node)):
            return None
        return self.rewrite_at(model, graph_or_function, node, verbose, tracer)

    def admits(self, producers: list[str]) -> bool:
        """Whether the root's inputs are produced by the op types the pattern needs there
        (``producers``: :func:`producer_ops` of the node)."""
        return all(producers.count(op) >= n for op, n in self._needs)

    def rewrite_at(self, model, graph_or_function, node, verbose, tracer):
        """The rewrite at ``node`` (of the root op, admitted), or None."""
        for entry in self._variants:
            if not fits_skeleton(node, entry[0]):
                continue
            delta = self._variant_rule(entry).try_rewrite(model, graph_or_function, node,
                                                          verbose=verbose, tracer=tracer)
            if delta is not None:
                return delta
        return None


def producer_ops(node: ir.Node) -> list[str]:
    """The op types producing ``node``'s inputs, with multiplicity (a node has a few inputs:
    a list counts them faster than a Counter is made)."""
    return [p.op_type for v in node.inputs if v is not None and (p := v.producer()) is not None]


class ByRootOp:
    """``rules`` (AnchoredRules) as the single rule of a ``RewriteRuleSet``: at each node it
    tries, in their order, only the rules whose pattern's output op is the node's op type --
    the others would reject the node at once -- so the rewriter makes one call per node
    instead of one per rule. The first rewrite found is returned, as the rewriter takes the
    first one of its rule list; ``name`` is then the applying rule's name, which the rewriter
    reads right after to tag the new nodes. (With a tracer, which applies nothing, every
    candidate rule is tried, as the rewriter does.)"""

    remove_nodes = True
    as_function = False
    graph_pre_visitor = None
    graph_post_visitor = None

    def __init__(self, rules) -> None:
        self.rules = list(rules)
        by_op: dict[str | None, list[AnchoredRule]] = {}
        for rule in self.rules:
            if not isinstance(rule, AnchoredRule) or not rule.remove_nodes or \
                    rule.as_function or rule.graph_pre_visitor or rule.graph_post_visitor:
                raise TypeError(f"ByRootOp takes plain AnchoredRules, not {rule!r}")
            by_op.setdefault(rule._root_op, []).append(rule)
        self._by_op = by_op
        self.name: str | None = None

    def try_rewrite(self, model, graph_or_function, node, *, verbose=None, tracer=None):
        rules = self._by_op.get(node.op_type)
        if rules is None or node.domain not in ("", "ai.onnx"):
            return None
        producers = producer_ops(node)  # once for all the rules rooted at this op
        found = None
        for rule in rules:
            if not rule.admits(producers):
                continue
            delta = rule.rewrite_at(model, graph_or_function, node, verbose, tracer)
            if delta is not None and found is None:
                found = delta
                self.name = rule.name
                if tracer is None:
                    break
        return found
