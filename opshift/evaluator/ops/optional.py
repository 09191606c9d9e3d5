"""Optional, OptionalGetElement, OptionalHasElement on the evaluator's optionals: an empty
one is None, a full one its element itself (:mod:`opshift.evaluator.values`). (onnx.reference
wraps the element in a list, so OptionalHasElement of its empty optional says true and
OptionalGetElement gives the list.)"""

from __future__ import annotations

import numpy as np

from opshift.evaluator.registry import op


@op("Optional", 15, 28)
def optional(ctx, x=None):
    """The input as an optional holding it; without one, the empty optional of ``type``."""
    if x is None and "type" not in ctx.attrs:
        raise ctx.error("an Optional without input needs the 'type' attribute")
    return (x,)  # a tuple of outputs: a sequence returned alone would be read as outputs


@op("OptionalGetElement", 15, 18, 28)
def optional_get_element(ctx, v):
    """The optional's element (from 18 on, a tensor or sequence is its own element)."""
    if v is None:
        raise ctx.error("the optional is empty: it has no element to get")
    return (v,)


@op("OptionalHasElement", 15, 18, 28)
def optional_has_element(ctx, v=None):
    """Whether the optional holds an element (from 18 on, a left-out input: false)."""
    return np.array(v is not None)
