"""``fix``: repair the defects that break runtimes, without changing the model's opset.

Each repair is exact (the numbers the model computes do not change) and is listed with the
node, what changed and why:

* ``consumed_inputs`` (or any other attribute named so) left on a node whose schema version in
  force does not define it (opset >= 6): removed; it only ever was an in-place hint.
* PRelu (version >= 7) with a 1-D slope ``[C]`` that only makes sense per channel (X's axis 1
  is C, its last axis is a known size other than C): the slope becomes ``[C, 1, ..., 1]`` (the
  constant is reshaped, copied first if shared, or an Unsqueeze is inserted when it is
  dynamic). When both readings are possible (axis 1 and last axis are both C) the node is
  reported and left alone unless ``prelu_slope='channel'`` or ``'numpy'`` says which.
* Attributes of the wrong type (``alpha`` given as INT, as a one-element TENSOR or FLOATS):
  converted to the schema's type when the value is exactly representable, else refused.
* Missing opset imports for a used domain: refused for the default domain (its version is
  unknown); a model-local function's domain gets version 1; a function body missing an import
  the model has gets the model's version.
* Duplicate node names (renamed) and values produced twice (the later producer and its uses
  after it are renamed; refused when the name is a graph or function output).
* A model-local function defined twice (same domain, name and overload): a later definition
  identical to the first is removed (a call means the same either way); definitions that
  differ are refused, since a call could mean either body.
* A declared IR version older than the opsets and features need (raised), or newer than the
  opset's (lowered, never below what imports and features need, and never when the model uses
  a feature whose IR version opshift cannot date).

``fix_proto`` edits a ``ModelProto`` in place and returns a :class:`FixResult`; ``fix`` works on
a copy and returns the kind it was given; :class:`FixPass` is the ``onnx_ir`` adapter.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import broadcast, opsets
from ..errors import ConversionError, function_label
from ..modelio import ModelLike, from_proto, to_proto
from ._graph import (
    Names,
    Scope,
    iter_scopes,
    lazy_attribute,
    run_as_ir_pass,
    splice,
    static_shapes,
    subgraphs,
)

SLOPE_CHOICES = ("channel", "numpy")
_A = onnx.AttributeProto


@dataclass(frozen=True)
class FixChange:
    """One change ``fix`` made (or, in a report of defects, one it would leave alone)."""

    kind: str  # consumed_inputs | attribute_type | prelu_slope | opset_import | node_name
    #            | value_name | ir_version | unknown_attribute | function
    scope: str  # iter_scopes label, or 'model'
    node: str  # node name, '<Op #i>' when unnamed, '' for model-level changes
    what: str
    why: str

    def line(self) -> str:
        loc = f"{self.scope}" + (f", node {self.node}" if self.node else "")
        return f"{loc}: {self.what} -- {self.why}"


@dataclass
class FixResult:
    """What :func:`fix_proto` changed, what it reported and left alone, and what it refused."""

    changes: list[FixChange] = field(default_factory=list)
    left_alone: list[FixChange] = field(default_factory=list)
    refused: list[FixChange] = field(default_factory=list)

    @property
    def modified(self) -> bool:
        return bool(self.changes)

    def __bool__(self) -> bool:  # truthy when anything was found
        return bool(self.changes or self.left_alone or self.refused)

    def to_dict(self) -> dict[str, Any]:
        return {"modified": self.modified,
                "changes": [asdict(c) for c in self.changes],
                "left_alone": [asdict(c) for c in self.left_alone],
                "refused": [asdict(c) for c in self.refused]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    def table(self) -> str:
        """Human-readable lines: one per change, then what was left alone or refused."""
        out = [f"fixed: {c.line()}" for c in self.changes]
        out += [f"left alone: {c.line()}" for c in self.left_alone]
        out += [f"refused: {c.line()}" for c in self.refused]
        return "\n".join(out) if out else "no defects found"


# -- entry points ---------------------------------------------------------------------------

def fix_proto(model: onnx.ModelProto, *, prelu_slope: str | None = None,
              strict: bool = True) -> FixResult:
    """Repair ``model`` in place; return what changed.

    With ``strict`` (the default) a defect that cannot be repaired exactly raises
    :class:`ConversionError` naming it (the model may then be partly repaired: use
    :func:`fix` for all-or-nothing). With ``strict=False`` refusals are only listed in
    :attr:`FixResult.refused` (``opshift inspect`` uses this on a copy).
    """
    if prelu_slope not in (None, *SLOPE_CHOICES):
        raise ConversionError(f"prelu_slope must be one of {', '.join(SLOPE_CHOICES)}, "
                              f"got {prelu_slope!r}")
    fx = _Fixer(model, prelu_slope)
    fx.run()
    if strict and fx.result.refused:
        first = fx.result.refused[0]
        more = len(fx.result.refused) - 1
        raise ConversionError(f"cannot fix exactly: {first.line()}"
                              + (f" (and {more} more)" if more else ""))
    return fx.result


def fix(model: ModelLike, *, prelu_slope: str | None = None) -> Any:
    """Return a repaired copy of ``model`` (ModelProto, onnx_ir.Model, or path -> ModelProto).

    The input is not mutated. Raises :class:`ConversionError` if a defect cannot be repaired
    exactly. Use :func:`fix_proto` to also get the list of changes.
    """
    proto, kind, _ = to_proto(model)
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    fix_proto(copy, prelu_slope=prelu_slope)
    return from_proto(copy, kind)


def fix_with_result(model: ModelLike, *, prelu_slope: str | None = None,
                    strict: bool = True) -> tuple[onnx.ModelProto, FixResult]:
    """Like :func:`fix` but returns ``(fixed ModelProto copy, FixResult)``."""
    proto, _, _ = to_proto(model)
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    return copy, fix_proto(copy, prelu_slope=prelu_slope, strict=strict)


def _make_fix_pass() -> type:
    import onnx_ir as ir
    import onnx_ir.passes as ir_passes

    class FixPass(ir_passes.InPlacePass):
        """``onnx_ir`` adapter over :func:`fix_proto`. ``modified`` is True only if a fix was
        made. The last run's :class:`FixResult` is kept in :attr:`last_result`."""

        def __init__(self, prelu_slope: str | None = None):
            super().__init__()
            self.prelu_slope = prelu_slope
            self.last_result: FixResult | None = None

        def call(self, model: ir.Model) -> ir_passes.PassResult:
            self.last_result, out = run_as_ir_pass(
                model, lambda proto: fix_proto(proto, prelu_slope=self.prelu_slope))
            return out

    FixPass.__module__ = __name__
    return FixPass


__getattr__ = lazy_attribute(globals(), "FixPass", _make_fix_pass)


# -- the fixer --------------------------------------------------------------------------------

def _node_id(node: onnx.NodeProto, index: int) -> str:
    return repr(node.name) if node.name else f"<{node.op_type} #{index}>"


def _walk_nodes(nodes) -> Iterator[onnx.NodeProto]:
    for n in nodes:
        yield n
        for _, g in subgraphs(n):
            yield from _walk_nodes(g.node)


class _Fixer:
    def __init__(self, model: onnx.ModelProto, prelu_slope: str | None):
        self.model = model
        self.prelu_slope = prelu_slope
        self.result = FixResult()
        self._functions: set[tuple[str, str]] | None = None
        self._uses: dict[int, dict[str, int]] = {}  # id(root node list) -> name -> uses

    def change(self, kind, scope, node, what, why) -> None:
        self.result.changes.append(FixChange(kind, scope, node, what, why))

    def leave(self, kind, scope, node, what, why) -> None:
        self.result.left_alone.append(FixChange(kind, scope, node, what, why))

    def refuse(self, kind, scope, node, what, why) -> None:
        self.result.refused.append(FixChange(kind, scope, node, what, why))

    def run(self) -> None:
        self.fix_duplicate_functions()
        self.fix_opset_imports()
        for scope in list(iter_scopes(self.model)):
            self.fix_attributes(scope)
        for scope in list(iter_scopes(self.model)):
            self.fix_value_names(scope)
        self.fix_node_names()
        self.fix_prelu_slopes()
        self.fix_ir_version()

    # -- functions defined twice ----------------------------------------------------------------
    def fix_duplicate_functions(self) -> None:
        first: dict[tuple[str, str, str], onnx.FunctionProto] = {}
        drop: list[int] = []
        for i, f in enumerate(self.model.functions):
            earlier = first.setdefault((f.domain, f.name, f.overload), f)
            if earlier is f:
                continue
            label = function_label(f, overload=True)
            if f == earlier:
                drop.append(i)
                self.change("function", "model", "", f"removed a second definition of {label}",
                            "identical to the first, so every call means the same")
            else:
                self.refuse("function", "model", "", f"{label} is defined twice with different "
                            "bodies", "a call could mean either, and nothing says which")
        for i in reversed(drop):
            del self.model.functions[i]

    # -- opset imports ------------------------------------------------------------------------
    def fix_opset_imports(self) -> None:
        m = self.model
        fdomains = {opsets.normalize_domain(f.domain) for f in m.functions}
        imported = {opsets.normalize_domain(i.domain) for i in m.opset_import}
        used = {opsets.normalize_domain(n.domain) for n in _walk_nodes(m.graph.node)}
        for d in sorted(used - imported):
            self._add_import(m, d, fdomains, "model", f"graph {m.graph.name!r}")
            imported.add(d)
        for f in m.functions:
            label = function_label(f)
            fimported = {opsets.normalize_domain(i.domain) for i in f.opset_import}
            fused = {opsets.normalize_domain(n.domain) for n in _walk_nodes(f.node)}
            for d in sorted(fused - fimported):
                v = opsets.opset_of(m, d)
                if v is not None:
                    f.opset_import.append(helper.make_opsetid(d, v))
                    self.change("opset_import", label, "",
                                f"added opset import {d or 'ai.onnx'!r} version {v} to the "
                                "function", "its body uses the domain; the model imports that "
                                "version, which is what runtimes fall back to")
                else:
                    self._add_import(f, d, fdomains, label, label)

    def _add_import(self, holder, d: str, fdomains: set[str], scope: str, users: str) -> None:
        if d == "":
            self.refuse("opset_import", scope, "", "no opset import for the default domain",
                        f"{users} uses ai.onnx ops but the version is unknown")
        elif d in fdomains:
            holder.opset_import.append(helper.make_opsetid(d, 1))
            self.change("opset_import", scope, "", f"added opset import {d!r} version 1",
                        f"{users} calls model-local functions of domain {d!r}; onnx's checker "
                        "requires an import for every domain a node uses")
        else:
            self.refuse("opset_import", scope, "", f"no opset import for domain {d!r}",
                        f"{users} uses it and no model-local function defines it, so its "
                        "version is unknown")

    # -- attributes ---------------------------------------------------------------------------
    def fix_attributes(self, scope: Scope) -> None:
        for i, node in enumerate(scope.nodes):
            d = opsets.normalize_domain(node.domain)
            if self._is_function(node):
                continue
            opset = scope.opsets.get(d)
            if opset is None:
                continue
            s = opsets.schema(node.op_type, opset, d)
            if s is None:
                continue
            ver = s.since_version
            label = f"{node.op_type}-{ver}"
            keep = []
            dropped = False
            for a in node.attribute:
                if a.ref_attr_name:
                    keep.append(a)
                    continue
                spec = s.attributes.get(a.name)
                if spec is None:
                    if a.name == "consumed_inputs":
                        dropped = True
                        self.change("consumed_inputs", scope.label, _node_id(node, i),
                                    "removed attribute 'consumed_inputs'",
                                    f"{label} does not define it (an in-place hint of opset "
                                    "< 6 with no effect on the result)")
                        continue
                    self.leave("unknown_attribute", scope.label, _node_id(node, i),
                               f"attribute {a.name!r} is not defined for {label}",
                               "its meaning is unknown, so it is not removed")
                    keep.append(a)
                    continue
                want = spec.type.value
                if a.type != want:
                    new, why = _convert_attribute(a, want)
                    what = (f"attribute {a.name!r} of {label}: "
                            f"{_A.AttributeType.Name(a.type)} -> {_A.AttributeType.Name(want)}")
                    if new is None:
                        self.refuse("attribute_type", scope.label, _node_id(node, i), what,
                                    why)
                        keep.append(a)
                    else:
                        self.change("attribute_type", scope.label, _node_id(node, i),
                                    f"{what} ({why})", "the schema declares "
                                    f"{_A.AttributeType.Name(want)}; runtimes reject other "
                                    "types")
                        keep.append(new)
                        dropped = True
                else:
                    keep.append(a)
            if dropped:
                del node.attribute[:]
                node.attribute.extend(keep)

    def _is_function(self, node: onnx.NodeProto) -> bool:
        if self._functions is None:
            self._functions = {(opsets.normalize_domain(f.domain), f.name)
                               for f in self.model.functions}
        return (opsets.normalize_domain(node.domain), node.op_type) in self._functions

    # -- SSA ----------------------------------------------------------------------------------
    def fix_value_names(self, scope: Scope) -> None:
        if scope.graph is not None:
            defined = {v.name for v in scope.graph.input}
            defined |= {t.name for t in scope.graph.initializer}
            outputs = {v.name for v in scope.graph.output}
        else:
            f = scope.function
            defined = set(f.input)
            outputs = set(f.output)
        defined.discard("")
        rename: dict[str, str] = {}
        names: Names | None = None
        for i, node in enumerate(scope.nodes):
            if rename:
                _rename_uses(node, rename)
            seen_here: set[str] = set()
            for k, out in enumerate(node.output):
                if not out:
                    continue
                if out in seen_here:
                    self.refuse("value_name", scope.label, _node_id(node, i),
                                f"output {out!r} appears twice on the same node",
                                "which output is meant cannot be decided")
                    continue
                seen_here.add(out)
                if out not in defined:
                    defined.add(out)
                    rename.pop(out, None)
                    continue
                if out in outputs:
                    self.refuse("value_name", scope.label, _node_id(node, i),
                                f"value {out!r} is produced twice and is an output of "
                                f"{scope.label}", "which producer is the output is ambiguous")
                    continue
                names = names or Names(self.model)
                new = names.fresh(out)
                node.output[k] = new
                rename[out] = new
                self.change("value_name", scope.label, _node_id(node, i),
                            f"renamed output {out!r} to {new!r} and its later uses",
                            f"{out!r} was already defined earlier in the scope (SSA "
                            "violation); later nodes read the latest definition")

    # -- node names ---------------------------------------------------------------------------
    def fix_node_names(self) -> None:
        """Node names are unique per graph tree (main graph with its subgraphs) and per
        function body; later duplicates get fresh names."""
        names: Names | None = None
        seen: dict[str, set[str]] = {}
        for scope in iter_scopes(self.model):
            root = scope.label.split("/", 1)[0]  # the main graph, or the function
            used = seen.setdefault(root, set())
            for i, n in enumerate(scope.nodes):
                if not n.name:
                    continue
                if n.name in used:
                    names = names or Names(self.model)
                    old = n.name
                    n.name = names.fresh(old)
                    self.change("node_name", scope.label, repr(old),
                                f"renamed this {n.op_type} node (#{i}) to {n.name!r}",
                                f"another node is already named {old!r}; node names must be "
                                "unique")
                used.add(n.name)

    # -- PRelu slope --------------------------------------------------------------------------
    def fix_prelu_slopes(self) -> None:
        shapes: dict | None = None
        names: Names | None = None
        for scope in list(iter_scopes(self.model)):
            replacements: dict[int, list[onnx.NodeProto]] = {}
            consts: dict[str, tuple] | None = None
            for i, node in enumerate(scope.nodes):
                if node.op_type != "PRelu" or opsets.normalize_domain(node.domain) != "":
                    continue
                if consts is None:
                    consts = _scope_constants(scope)
                self._consts = consts
                if scope.opset is None or len(node.input) < 2:
                    continue
                ver = opsets.since_version("PRelu", scope.opset)
                if ver is None or ver < 7:
                    continue
                if scope.function is not None:
                    # X's shape depends on each call site; names in a function body are
                    # their own namespace, so graph shapes say nothing about them.
                    found = consts.get(node.input[1])
                    if found is not None and len(found[0].dims) == 1 and found[0].dims[0] > 1:
                        self.leave("prelu_slope", scope.label, _node_id(node, i),
                                   f"1-D slope {node.input[1]!r} {list(found[0].dims)} not "
                                   "checked", "X's shape inside a function depends on the "
                                   "call site, so its reading cannot be decided")
                    continue
                if shapes is None:
                    shapes = static_shapes(self.model)
                xs = shapes.get(node.input[0])
                ss = self._slope_shape(scope, node.input[1], shapes)
                if xs is None or ss is None:
                    continue
                if (all(isinstance(d, int) for d in (*xs, *ss))
                        and broadcast.numpy_shape(xs, ss) is None
                        and not broadcast.legacy_is_per_channel(xs, ss)):
                    self.refuse("prelu_slope", scope.label, _node_id(node, i),
                                f"slope {node.input[1]!r} {list(ss)} does not broadcast to X "
                                f"{list(xs)}", "no reading (numpy, or per channel on axis 1) "
                                "fits, so there is nothing exact to repair")
                    continue
                if len(ss) != 1 or len(xs) < 3:
                    continue
                c = ss[0]
                if not isinstance(c, int) or c == 1 or xs[1] != c:
                    continue
                if not broadcast.legacy_is_per_channel(xs, ss):
                    continue
                nid = _node_id(node, i)
                last = xs[-1]
                target = [c] + [1] * (len(xs) - 2)
                what = (f"slope {node.input[1]!r} {list(ss)} -> {target} so it applies per "
                        "channel on axis 1")
                if last == c or not isinstance(last, int):
                    amb = (f"X {list(xs)}: the 1-D slope of {c} fits both axis 1 "
                           "(per channel, legacy PRelu <= 6) and the last axis (numpy)")
                    if self.prelu_slope == "numpy":
                        self.leave("prelu_slope", scope.label, nid, "kept the numpy "
                                   "(last-axis) reading", amb + "; --prelu-slope=numpy")
                        continue
                    if self.prelu_slope != "channel":
                        self.leave("prelu_slope", scope.label, nid, "ambiguous slope; "
                                   "choose with --prelu-slope=channel|numpy", amb)
                        continue
                    why = amb + "; --prelu-slope=channel"
                else:
                    why = (f"X {list(xs)}: numpy broadcasting (PRelu-{ver}) cannot apply a "
                           f"slope of {c} to a last axis of {last}; it only makes sense per "
                           "channel on axis 1 (as PRelu <= 6 read it)")
                names = names or Names(self.model)
                how, new_nodes = self._reshape_slope(scope, i, node, target, names)
                if new_nodes:
                    replacements[i] = [*new_nodes, node]
                self.change("prelu_slope", scope.label, nid, f"{what} ({how})", why)
            splice(scope.nodes, replacements)

    def _slope_shape(self, scope: Scope, name: str, shapes: dict):
        t = self._consts.get(name)
        if t is not None:
            return tuple(t[0].dims)
        return shapes.get(name)

    def _reshape_slope(self, scope: Scope, index: int, node: onnx.NodeProto,
                       target: list[int], names: Names) -> tuple[str, list[onnx.NodeProto]]:
        slope = node.input[1]
        found = self._consts.get(slope)
        graph_inputs = {v.name for v in scope.graph.input} if scope.graph is not None else set()
        if found is not None and slope not in graph_inputs:
            tensor, holder = found
            uses = self._use_counts(scope)
            if uses.get(slope, 0) == 1:
                del tensor.dims[:]
                tensor.dims.extend(target)
                if scope.graph is not None:
                    _update_value_info(scope.graph, slope, target)
                return "constant reshaped in place", []
            new_name = names.fresh(f"{slope}_per_channel")
            uses[slope] -= 1
            uses[new_name] = 1
            t2 = onnx.TensorProto()
            t2.CopyFrom(tensor)
            t2.name = new_name
            del t2.dims[:]
            t2.dims.extend(target)
            node.input[1] = new_name
            if scope.graph is not None and isinstance(holder, onnx.GraphProto):
                scope.graph.initializer.append(t2)
                return f"shared constant copied to {new_name!r}", []
            t2.name = ""
            const = helper.make_node("Constant", [], [new_name], value=t2,
                                     name=names.fresh(f"{new_name}_const"))
            return f"shared constant copied to {new_name!r}", [const]
        # dynamic slope: Unsqueeze it to [C, 1, ..., 1]
        axes = list(range(1, len(target)))
        out = names.fresh(f"{slope}_per_channel")
        uname = names.fresh(f"{node.name or 'prelu'}_slope_unsqueeze")
        if opsets.since_version("Unsqueeze", scope.opset) >= 13:
            axes_name = names.fresh(f"{uname}_axes")
            const = helper.make_node("Constant", [], [axes_name],
                                     value=numpy_helper.from_array(np.array(axes, np.int64)),
                                     name=names.fresh(f"{axes_name}_const"))
            unsq = helper.make_node("Unsqueeze", [slope, axes_name], [out], name=uname)
            new_nodes = [const, unsq]
        else:
            new_nodes = [helper.make_node("Unsqueeze", [slope], [out], name=uname, axes=axes)]
        node.input[1] = out
        return f"Unsqueeze {uname!r} inserted (axes {axes})", new_nodes

    def _use_counts(self, scope: Scope) -> dict[str, int]:
        root = scope.function if scope.function is not None else self.model.graph
        key = id(root)
        if key not in self._uses:
            self._uses[key] = _count_uses(root)
        return self._uses[key]

    # -- IR version ---------------------------------------------------------------------------
    def fix_ir_version(self) -> None:
        m = self.model
        declared = m.ir_version
        need, undatable = _ir_needed(m)
        opset = opsets.opset_of(m)
        if declared < need:
            m.ir_version = need
            self.change("ir_version", "model", "", f"IR version {declared} -> {need}",
                        f"IR {declared} is too old for {_imports_str(m)}"
                        + (" and the features the model uses" if need > _ir_for_imports(m)
                           else ""))
        elif declared > need:
            if undatable:
                if declared > onnx.IR_VERSION:
                    self.refuse("ir_version", "model", "", f"IR version {declared} is newer "
                                f"than the installed onnx knows ({onnx.IR_VERSION})",
                                f"the model uses {undatable}, whose IR version opshift "
                                "cannot date")
                return
            m.ir_version = need
            self.change("ir_version", "model", "", f"IR version {declared} -> {need}",
                        f"IR {declared} is newer than opset {opset} and the model's features "
                        f"need (IR {need}); runtimes of that opset's era reject it")


# -- helpers ------------------------------------------------------------------------------------

def _imports_str(m: onnx.ModelProto) -> str:
    return ", ".join(f"{i.domain or 'ai.onnx'} {i.version}" for i in m.opset_import)


def _ir_for_imports(m: onnx.ModelProto) -> int:
    ids = [helper.make_opsetid(opsets.normalize_domain(i.domain), i.version)
           for i in m.opset_import]
    return helper.find_min_ir_version_for(ids, ignore_unknown=True)


#: Tensor element types introduced after IR 3, with the IR version that introduced them.
#: Types not listed here and not in the IR 3 set make the IR version undatable (never lowered).
_IR3_TYPES = {getattr(onnx.TensorProto, n) for n in (
    "FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL", "FLOAT16",
    "DOUBLE", "UINT32", "UINT64", "COMPLEX64", "COMPLEX128")}


def _ir_needed(m: onnx.ModelProto) -> tuple[int, str]:
    """(minimum IR version the imports and datable features need, name of an undatable
    feature or '')."""
    need = _ir_for_imports(m)
    undatable = ""
    if len(m.functions):
        need = max(need, 8)  # model-local functions (IR 8)
    for g in _all_graphs(m):
        inputs = {v.name for v in g.input}
        if any(t.name not in inputs for t in g.initializer):
            need = max(need, 4)  # initializers that are not graph inputs (IR 4)
            break
    if any(getattr(f, "overload", "") for f in m.functions) or any(
            getattr(n, "overload", "") for n in _all_nodes(m)):
        need = max(need, 10)
    if len(m.training_info) or m.graph.sparse_initializer:
        undatable = "training info or sparse initializers"
    for t in _all_types(m):
        if t not in _IR3_TYPES:
            undatable = undatable or f"element type {onnx.TensorProto.DataType.Name(t)}"
    odd = (_A.SPARSE_TENSOR, _A.SPARSE_TENSORS, _A.TYPE_PROTO, _A.TYPE_PROTOS)
    if any(a.type in odd for n in _all_nodes(m) for a in n.attribute):
        undatable = undatable or "sparse tensor or type attributes"
    if _has_non_tensor_types(m):
        undatable = undatable or "sequence, map or optional types"
    if any(len(getattr(n, "metadata_props", [])) for n in _all_nodes(m)) or any(
            len(getattr(f, "value_info", [])) or len(getattr(f, "metadata_props", []))
            for f in m.functions):
        need = max(need, 10)  # node metadata, function value_info/metadata (IR 10)
    if len(getattr(m, "configuration", [])) or any(
            len(getattr(n, "device_configurations", [])) for n in _all_nodes(m)):
        undatable = undatable or "device configurations"
    return need, undatable


def _all_nodes(m: onnx.ModelProto) -> Iterator[onnx.NodeProto]:
    yield from _walk_nodes(m.graph.node)
    for f in m.functions:
        yield from _walk_nodes(f.node)


def _all_graphs(m: onnx.ModelProto) -> Iterator[onnx.GraphProto]:
    yield m.graph
    for n in _all_nodes(m):
        for _, g in subgraphs(n):
            yield g


def _all_types(m: onnx.ModelProto) -> Iterator[int]:
    for g in _all_graphs(m):
        for t in g.initializer:
            yield t.data_type
        for vi in (*g.input, *g.output, *g.value_info):
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
                yield vi.type.tensor_type.elem_type
    for n in _all_nodes(m):
        for a in n.attribute:
            if a.type == _A.TENSOR:
                yield a.t.data_type
            elif a.type == _A.INT and a.name in ("to", "dtype", "output_dtype") and a.i:
                yield a.i


def _has_non_tensor_types(m: onnx.ModelProto) -> bool:
    for g in _all_graphs(m):
        for vi in (*g.input, *g.output, *g.value_info):
            if vi.type.WhichOneof("value") not in (None, "tensor_type"):
                return True
    return False


def _convert_attribute(a: onnx.AttributeProto, want: int
                       ) -> tuple[onnx.AttributeProto | None, str]:
    """An attribute of type ``want`` holding exactly ``a``'s value, or (None, reason)."""
    got = _A.AttributeType.Name(a.type)
    scalar: Any = None
    if a.type == _A.INT:
        scalar = int(a.i)
    elif a.type == _A.FLOAT:
        scalar = np.float32(a.f)
    elif a.type in (_A.INTS, _A.FLOATS):
        vals = list(a.ints) if a.type == _A.INTS else [np.float32(v) for v in a.floats]
        if len(vals) != 1 and want in (_A.INT, _A.FLOAT):
            return None, f"{got} with {len(vals)} values cannot become one scalar"
        scalar = vals[0] if len(vals) == 1 else None
    elif a.type == _A.TENSOR:
        arr = numpy_helper.to_array(a.t)
        if arr.size != 1:
            return None, f"a tensor of shape {list(arr.shape)} is not one value"
        v = arr.reshape(()).item()
        if arr.dtype == np.bool_ or not isinstance(v, (int, float)):
            return None, f"a {arr.dtype} tensor cannot become a number attribute"
        scalar = v if isinstance(v, int) else (
            np.float32(v) if arr.dtype == np.float32 else float(v))
    if scalar is None:
        return None, f"no exact conversion from {got}"
    if want in (_A.FLOAT, _A.FLOATS):
        f32 = np.float32(scalar)
        exact = (float(f32) == float(scalar)) if not isinstance(scalar, int) else (
            int(f32) == scalar if np.isfinite(f32) else False)
        if not exact:
            return None, f"the value {scalar!r} is not exactly representable as float32"
        if want == _A.FLOAT:
            new = helper.make_attribute(a.name, float(f32), attr_type=_A.FLOAT)
        else:
            new = helper.make_attribute(a.name, [float(f32)], attr_type=_A.FLOATS)
    elif want in (_A.INT, _A.INTS):
        if isinstance(scalar, (np.floating, float)) and not (
                np.isfinite(scalar) and float(scalar) == int(scalar)):
            return None, f"the value {float(scalar)!r} is not an integer"
        iv = int(scalar)
        if not -(2 ** 63) <= iv < 2 ** 63:
            return None, f"the value {iv} does not fit int64"
        new = (helper.make_attribute(a.name, iv, attr_type=_A.INT) if want == _A.INT else
               helper.make_attribute(a.name, [iv], attr_type=_A.INTS))
    else:
        return None, f"no exact conversion from {got} to {_A.AttributeType.Name(want)}"
    if a.doc_string:
        new.doc_string = a.doc_string
    shown = onnx.helper.get_attribute_value(new)
    return new, f"value {shown!r}"


def _scope_constants(scope: Scope) -> dict[str, tuple]:
    """Name -> (TensorProto, holder) for initializers and Constant(value=) outputs in
    ``scope`` (holder: the GraphProto or the Constant node)."""
    out: dict[str, tuple] = {}
    if scope.graph is not None:
        for t in scope.graph.initializer:
            out[t.name] = (t, scope.graph)
    for n in scope.nodes:
        if (n.op_type == "Constant" and opsets.normalize_domain(n.domain) == ""
                and len(n.output) == 1 and len(n.attribute) == 1
                and n.attribute[0].name == "value" and n.attribute[0].type == _A.TENSOR):
            out[n.output[0]] = (n.attribute[0].t, n)
    return out


def _count_uses(root) -> dict[str, int]:
    """Name -> uses by nodes and outputs of a graph tree or a function (with subgraphs)."""
    counts: dict[str, int] = {}
    outs = root.output if isinstance(root, onnx.FunctionProto) else [v.name for v in
                                                                       root.output]
    for name in outs:
        counts[name] = counts.get(name, 0) + 1
    for n in _walk_nodes(root.node):
        for name in n.input:
            counts[name] = counts.get(name, 0) + 1
        for _, g in subgraphs(n):
            for v in g.output:
                counts[v.name] = counts.get(v.name, 0) + 1
    return counts


def _update_value_info(graph: onnx.GraphProto, name: str, dims: list[int]) -> None:
    for vi in (*graph.value_info, *graph.output):
        if vi.name == name and vi.type.HasField("tensor_type"):
            shape = vi.type.tensor_type.shape
            del shape.dim[:]
            for d in dims:
                shape.dim.add().dim_value = d


def _rename_uses(node: onnx.NodeProto, rename: dict[str, str]) -> None:
    for k, name in enumerate(node.input):
        if name in rename:
            node.input[k] = rename[name]
    for _, g in subgraphs(node):
        local = {v.name for v in g.input} | {t.name for t in g.initializer}
        inner = {k: v for k, v in rename.items() if k not in local}
        if not inner:
            continue
        for n in g.node:
            _rename_uses(n, inner)
            inner = {k: v for k, v in inner.items() if k not in set(n.output)}
        for v in g.output:
            if v.name in inner:
                v.name = inner[v.name]


# -- verification ---------------------------------------------------------------------------------

@dataclass
class FixVerification:
    """How far ``--verify`` could prove a fix exact.

    ``status``: ``'verified'`` (outputs of original and fixed compared equal), ``'mismatch'``
    (they differ: a bug, exit 1), or ``'partial'`` (the original cannot run as-is -- the defect
    makes it invalid -- so only the fixed model was run; ``detail`` says why).
    """

    status: str
    method: str  # 'evaluator', 'onnxruntime', or '' when nothing could run
    detail: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status != "mismatch"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def line(self) -> str:
        return f"verify: {self.status} ({self.method or 'nothing ran'}): {self.detail}"


def verify_fix(original: onnx.ModelProto, fixed: onnx.ModelProto, *, seed: int = 0
               ) -> FixVerification:
    """Compare ``original`` and ``fixed`` on the same inputs: with opshift's evaluator, else
    with onnxruntime; when the original cannot run at all, run the fixed model alone."""
    from ..errors import LimitError, OpshiftError, VerificationError
    from ..verify import verify

    try:
        report = verify(original, fixed, seed=seed)
    except VerificationError:
        raise
    except LimitError as e:  # what is over opshift's limits is not handed to onnxruntime
        return FixVerification("partial", "", f"not compared: {e}")
    except OpshiftError as e:
        why_eval = str(e)
    else:
        return FixVerification("verified" if report.ok else "mismatch", "evaluator",
                               report.summary(), [r.to_dict() for r in report.rows])
    why_ort = ""
    try:
        from ..verify import make_inputs

        feeds = make_inputs(original.graph, seed=seed)
    except OpshiftError as e:
        return FixVerification("partial", "", f"no inputs can be generated ({e}); the "
                               "original cannot be compared")
    ref_out = _ort_run(original, feeds)
    if isinstance(ref_out, str):
        why_ort = ref_out
    else:
        got = _ort_run(fixed, feeds)
        if isinstance(got, str):
            return FixVerification("mismatch", "onnxruntime", f"the original runs on "
                                   f"onnxruntime but the fixed model does not: {got}")
        from ..verify import compare

        rows, ok = [], True
        for vi, e, a in zip(original.graph.output, ref_out, got):
            c = compare(e, a)
            ok &= c.ok
            rows.append({"output": vi.name, "ok": c.ok, "max_abs": c.max_abs,
                         "reason": c.reason})
        return FixVerification("verified" if ok else "mismatch", "onnxruntime",
                               f"{sum(r['ok'] for r in rows)} of {len(rows)} outputs match "
                               f"(the evaluator cannot run the original: {why_eval})", rows)
    # The original is invalid as-is: show the fixed model at least runs and checks.
    detail = (f"the original cannot run as-is (evaluator: {why_eval}; onnxruntime: "
              f"{why_ort}); ")
    try:
        onnx.checker.check_model(fixed)
    except onnx.checker.ValidationError as e:
        detail += f"the fixed model fails onnx.checker: {str(e).splitlines()[0]}; "
    except UnicodeDecodeError:  # the checker's message quotes a name that is not UTF-8
        detail += "the fixed model fails onnx.checker (on a name that is not UTF-8); "
    try:
        from ..evaluator import evaluate

        evaluate(fixed, feeds)
        return FixVerification("partial", "evaluator", detail + "the fixed model runs on "
                               "the evaluator; each fix is exact by construction")
    except LimitError as e:
        return FixVerification("partial", "", detail + f"the fixed model was not run: {e}")
    except OpshiftError as e:
        got = _ort_run(fixed, feeds)
        if isinstance(got, str):
            return FixVerification("partial", "", detail + f"the fixed model does not run "
                                   f"either (evaluator: {e}; onnxruntime: {got})")
        return FixVerification("partial", "onnxruntime", detail + "the fixed model runs on "
                               "onnxruntime; each fix is exact by construction")


def _ort_run(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[np.ndarray] | str:
    """Outputs from onnxruntime, or a one-line reason it could not run the model."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "onnxruntime is not installed"
    try:
        so = ort.SessionOptions()
        so.log_severity_level = 4
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        names = {i.name for i in sess.get_inputs()}
        return sess.run(None, {k: v for k, v in feeds.items() if k in names})
    except Exception as e:  # onnxruntime raises many types; we only need the reason
        return str(e).strip().splitlines()[0][:300]
