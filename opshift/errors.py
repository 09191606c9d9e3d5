"""Errors raised by opshift.

Every error opshift raises on purpose is an :class:`OpshiftError`; its message is one line
that says what is wrong and where (file, graph, node, op, version). The command line prints
that line and exits with :attr:`OpshiftError.exit_code`.
"""

from __future__ import annotations


class OpshiftError(Exception):
    """Bad input or an impossible request. Exit code 2."""

    exit_code = 2


class ModelLoadError(OpshiftError):
    """The file is missing, unreadable, or not a valid ONNX model."""


class UnsupportedError(OpshiftError):
    """An op, version, type or attribute opshift cannot handle exactly."""


class LimitError(UnsupportedError):
    """A check that would take more work than opshift allows itself (a Loop of 10**15
    iterations, inputs of billions of elements): not attempted, and not handed to another
    runtime either."""


class EvaluationError(OpshiftError):
    """The evaluator could not run a node (bad shapes, inputs that do not fit, ...)."""


class ConversionError(OpshiftError):
    """A rewrite could not be made exact, so none was made."""


class MissingOpError(ConversionError):
    """A node whose op does not exist at the target opset and has no exact replacement there
    (e.g. Where below opset 7); ``reason``: the message less the node's location."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason or message


class ConstantNeededError(ConversionError):
    """A node whose conversion needs input ``value`` as a constant (Pad's pads below opset 11,
    Slice's ends below 10), which a node computes; ``scope``: the scope of the refused node
    (a :class:`~opshift.graph.scopes.Scope`); ``reason``: the message less the node's
    location."""

    def __init__(self, message: str, value: str = "", scope: object = None,
                 reason: str = "") -> None:
        super().__init__(message)
        self.value, self.scope, self.reason = value, scope, reason or message


class BranchNeededError(ConversionError):
    """A refused If, which the branch its condition takes may replace (an If whose branches
    give an output in different shapes cannot go below If-11); ``scope``: its scope."""

    def __init__(self, message: str, scope: object = None) -> None:
        super().__init__(message)
        self.scope = scope


class ArgumentTypeError(OpshiftError, TypeError):
    """An argument of the wrong type passed to the API (``convert(model, "13")``): a
    TypeError, and an OpshiftError like every error opshift raises on purpose."""


class VerificationError(OpshiftError):
    """A rewritten model computes something other than the original. Exit code 1."""

    exit_code = 1


#: The exit code of a check that found no difference but left something unchecked (a
#: rewrite, a whole model that did not run, an output NaN everywhere): ``--verify`` exits 0
#: only when everything was checked, or with ``--allow-incomplete``.
EXIT_INCOMPLETE = 4


def function_id(f) -> str:
    """``domain::name`` of a model-local function (a FunctionProto or an onnx_ir Function),
    the name alone in the default domain."""
    return f"{f.domain}::{f.name}" if f.domain else f.name


def function_label(f, *, overload: bool = False) -> str:
    """``function domain::name``, the label a function's scope carries in messages; with
    ``overload``, its overload appended (``:overload``) when it has one."""
    label = f"function {function_id(f)}"
    return f"{label}:{f.overload}" if overload and f.overload else label


def where(node=None, *, op: str | None = None, version: int | None = None,
          domain: str | None = None, graph: str | None = None) -> str:
    """Format the location of a node for an error message: ``node 'n' (PRelu-6, graph 'g')``."""
    parts = []
    if node is not None:
        name = getattr(node, "name", "") or "<unnamed>"
        op = op or getattr(node, "op_type", None)
        if domain is None:
            domain = getattr(node, "domain", "")
        parts.append(f"node {name!r}")
    desc = op or "?"
    if domain not in (None, "", "ai.onnx"):
        desc = f"{domain}::{desc}"
    if version is not None:
        desc = f"{desc}-{version}"
    loc = f"{' '.join(parts)} ({desc}" if parts else f"({desc}"
    if graph:
        loc += f", graph {graph!r}"
    return loc + ")"


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on (newline, escape sequences,
    other controls) written as its Python escape, as ``repr`` shows it: a name read from a
    model can neither break a one-line record nor reach the terminal. Unchanged when it has
    none (the common case)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
