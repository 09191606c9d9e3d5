"""The fixer: runs every repair in order on a ``ModelProto`` in place."""

from __future__ import annotations

import os

import onnx
from onnx import helper

from opshift import opsets, progress
from opshift.check.structure import DUPLICATE_VALUE, NEGATIVE_DIM
from opshift.errors import ConversionError, function_label
from opshift.fix.attributes import fix_attributes
from opshift.fix.dims import fix_negative_dims
from opshift.fix.ir_version import fix_ir_version
from opshift.fix.names import fix_node_names, fix_value_names
from opshift.fix.prelu_slope import fix_prelu_slopes
from opshift.fix.report import FixChange, FixResult
from opshift.graph.facts import Facts
from opshift.graph.index import ModelIndex
from opshift.graph.scopes import Scope, iter_scopes
from opshift.io.models import ModelLike, working_copy

SLOPE_CHOICES = ("channel", "numpy")


def fix_proto(model: onnx.ModelProto, *, prelu_slope: str | None = None,
              strict: bool = True, base_dir: str | os.PathLike | None = None,
              facts: Facts | None = None) -> FixResult:
    """Repair ``model`` in place; return what changed.

    With ``strict`` (the default) a defect that cannot be repaired exactly raises
    :class:`ConversionError` naming it (the model may then be partly repaired: use
    :func:`fix` for all-or-nothing). With ``strict=False`` refusals are only listed in
    :attr:`FixResult.refused` (``opshift inspect`` uses this on a copy). ``base_dir``: the
    model's folder, for an attribute tensor kept in external data. ``facts``: a
    :class:`~opshift.graph.facts.Facts` of ``model`` as it is; when it reads the index of
    :func:`opshift.check.structure.check`'s walk of ``model`` (or of the model it is an
    unedited copy of), a repair of a defect the check looks for and did not find is skipped
    (values produced twice: every output name read again), and the names the walk kept
    (``keep_names``) are the ones fresh names avoid until the first repair.
    """
    if prelu_slope not in (None, *SLOPE_CHOICES):
        raise ConversionError(f"prelu_slope must be one of {', '.join(SLOPE_CHOICES)}, "
                              f"got {prelu_slope!r}")
    fx = Fixer(model, prelu_slope, base_dir, facts)
    fx.run()
    if strict and fx.result.refused:
        first = fx.result.refused[0]
        more = len(fx.result.refused) - 1
        raise ConversionError(f"cannot fix exactly: {first.line()}"
                              + (f" (and {more} more)" if more else ""))
    return fx.result


def fix_with_result(model: ModelLike, *, prelu_slope: str | None = None,
                    strict: bool = True, base_dir: str | os.PathLike | None = None,
                    index: ModelIndex | None = None) -> tuple[onnx.ModelProto, FixResult]:
    """:func:`opshift.fix` that also returns what it did: ``(fixed ModelProto copy,
    FixResult)``; ``base_dir``: the folder of a ModelProto's external data; ``index``: the
    index of :func:`opshift.check.structure.check`'s walk of ``model``, which the copy's
    :class:`~opshift.graph.facts.Facts` reads (see :func:`fix_proto`)."""
    work, _, folder = working_copy(model)
    return work, fix_proto(work, prelu_slope=prelu_slope, strict=strict,
                           base_dir=folder if base_dir is None else base_dir,
                           facts=Facts(work, index=index))


class Fixer:
    """The model being repaired, the options, and what was done so far."""

    def __init__(self, model: onnx.ModelProto, prelu_slope: str | None,
                 base_dir: str | os.PathLike | None = None, facts: Facts | None = None):
        self.model = model
        self._facts = facts if facts is not None else Facts(model)
        self.base_dir = base_dir
        self.prelu_slope = prelu_slope
        self.result = FixResult()
        self._functions: set[tuple[str, str]] | None = None
        self._scopes: list[Scope] | None = None

    def change(self, kind, scope, node, what, why) -> None:
        self.result.changes.append(FixChange(kind, scope, node, what, why))

    def leave(self, kind, scope, node, what, why) -> None:
        self.result.left_alone.append(FixChange(kind, scope, node, what, why))

    def refuse(self, kind, scope, node, what, why) -> None:
        self.result.refused.append(FixChange(kind, scope, node, what, why))

    def is_function_call(self, node: onnx.NodeProto) -> bool:
        if self._functions is None:
            self._functions = {(opsets.normalize_domain(f.domain), f.name)
                               for f in self.model.functions}
        return (opsets.normalize_domain(node.domain), node.op_type) in self._functions

    def scopes(self) -> list[Scope]:
        """Every scope of the model, listed once: the repairs before the PRelu slopes' (which
        reads :meth:`facts`, which lists its own scopes) add no node kinds and no scopes;
        one that adds opset imports lists them again (:meth:`relist`)."""
        if self._scopes is None:
            self._scopes = list(iter_scopes(self.model))
        return self._scopes

    def facts(self) -> Facts:
        """The model's Facts: the one given while it still describes the model, until the
        first repair (each repair that edits the model lists a change); after it, a new one
        each time asked (a repair reads the model as the repairs before it left it)."""
        return self._facts if not self.result.changes else Facts(self.model)

    def relist(self) -> None:
        """The scopes' opsets changed: list them again when next asked."""
        self._scopes = None

    def run(self) -> None:
        """Every repair in order, but for one of a defect the structural check looked for
        and did not find (see :func:`fix_proto`); the progress line counts them."""
        found = self._facts.found()
        values = found is None or DUPLICATE_VALUE in found
        dims = found is None or NEGATIVE_DIM in found
        repairs = (fix_duplicate_functions, fix_opset_imports,
                   *([fix_negative_dims] if dims else []), _per_scope(fix_attributes),
                   *([_per_scope(fix_value_names)] if values else []), fix_node_names,
                   fix_prelu_slopes, fix_ir_version)
        with progress.stage("fix", len(repairs), "repairs"):
            for repair in repairs:
                repair(self)
                progress.advance()


def _per_scope(repair):
    """``repair(fx, scope)`` run on every scope of the model (listed before it starts)."""

    def run(fx: Fixer) -> None:
        for scope in fx.scopes():
            repair(fx, scope)

    return run


def fix_duplicate_functions(fx: Fixer) -> None:
    """Remove a second definition of a model-local function identical to the first."""
    first: dict[tuple[str, str, str], onnx.FunctionProto] = {}
    drop: list[int] = []
    for i, f in enumerate(fx.model.functions):
        earlier = first.setdefault((f.domain, f.name, f.overload), f)
        if earlier is f:
            continue
        label = function_label(f, overload=True)
        if f == earlier:
            drop.append(i)
            fx.change("function", "model", "", f"removed a second definition of {label}",
                        "identical to the first, so every call means the same")
        else:
            fx.refuse("function", "model", "", f"{label} is defined twice with different "
                        "bodies", "a call could mean either, and nothing says which")
    for i in reversed(drop):
        del fx.model.functions[i]
    if drop:
        fx.relist()


def fix_opset_imports(fx: Fixer) -> None:
    """Add the opset imports the graph and the function bodies use but do not declare."""
    m = fx.model
    scopes = fx.scopes()
    changes = len(fx.result.changes)
    fdomains = {opsets.normalize_domain(f.domain) for f in m.functions}
    imported = {opsets.normalize_domain(i.domain) for i in m.opset_import}
    used: dict[int, set[str]] = {}  # root scope -> the domains its nodes use
    for sc in scopes:
        used.setdefault(id(sc.root), set()).update(
            opsets.normalize_domain(d) for d in {d for _, d in sc.kinds})
    for d in sorted(used.get(id(scopes[0]), set()) - imported):
        _add_import(fx, m, d, fdomains, "model", f"graph {m.graph.name!r}")
        imported.add(d)
    roots = {id(sc.function): sc for sc in scopes if sc.function is not None and sc.root is sc}
    for f in m.functions:
        label = function_label(f)
        fimported = {opsets.normalize_domain(i.domain) for i in f.opset_import}
        fused = used.get(id(roots[id(f)]), set())
        for d in sorted(fused - fimported):
            v = opsets.opset_of(m, d)
            if v is not None:
                f.opset_import.append(helper.make_opsetid(d, v))
                fx.change("opset_import", label, "",
                            f"added opset import {d or 'ai.onnx'!r} version {v} to the "
                            "function", "its body uses the domain; the model imports that "
                            "version, which is what runtimes fall back to")
            else:
                _add_import(fx, f, d, fdomains, label, label)
    if len(fx.result.changes) != changes:
        fx.relist()  # the scopes' opsets are the imports


def _add_import(fx: Fixer, holder, d: str, fdomains: set[str], scope: str, users: str) -> None:
    if d == "":
        fx.refuse("opset_import", scope, "", "no opset import for the default domain",
                    f"{users} uses ai.onnx ops but the version is unknown")
    elif d in fdomains:
        holder.opset_import.append(helper.make_opsetid(d, 1))
        fx.change("opset_import", scope, "", f"added opset import {d!r} version 1",
                    f"{users} calls model-local functions of domain {d!r}; onnx's checker "
                    "requires an import for every domain a node uses")
    else:
        fx.refuse("opset_import", scope, "", f"no opset import for domain {d!r}",
                    f"{users} uses it and no model-local function defines it, so its "
                    "version is unknown")
