"""Kernels from onnx.reference for the (op, version) pairs opshift has no kernel of its own for.

A node runs alone through the op class onnx.reference registers for the schema version in
force (``onnx.reference.ops.load_op``), with its version's attribute defaults written out
(onnx.reference's kernels know the newest schema's defaults only). Op versions whose schema
has a function body run that body in opshift's runtime (:mod:`.function_body`), never here. If,
Loop, Scan and model-local functions stay with opshift's runtime, which comes back here node
by node.

Where onnx.reference computes something other than the ONNX definition, opshift has its own
kernel and this module is never asked: Selu-1's defaults, PRelu's legacy broadcasting,
BatchNormalization in inference mode at versions 6..14, Erf (rounded to float32 whatever
the type), ConvTranspose (it fails for groups other than 1 or depthwise, and loops in Python
per output channel) (see ``ops/``). Random ops are never
taken from onnx.reference: two runs would differ.

onnx.reference is imported on the first node that needs it (~0.3 s), never for a model
opshift's kernels cover.
"""

from __future__ import annotations

import functools
import importlib
from typing import Any

import numpy as np

from opshift.evaluator import function_body

SOURCE = "onnx.reference"

#: Ops whose results are random: refused rather than run.
RANDOM = frozenset({"Bernoulli", "Multinomial", "RandomNormal", "RandomNormalLike",
                    "RandomUniform", "RandomUniformLike"})

#: Domain -> the onnx.reference module with its ``load_op``.
_MODULES = {"": "onnx.reference.ops", "ai.onnx.ml": "onnx.reference.ops.aionnxml",
            "ai.onnx.preview": "onnx.reference.ops.aionnx_preview",
            "ai.onnx.preview.training": "onnx.reference.ops.aionnx_preview_training"}

#: The domains onnx.reference has kernels for (opshift's own ops are in the default one).
DOMAINS = frozenset(_MODULES)

#: Versions onnx.reference has no kernel for whose meaning a later version's kernel keeps
#: (it only adds types or attributes whose defaults are the old behaviour): (op, version)
#: -> the version whose kernel runs them.
_LATER_KERNEL = {("DequantizeLinear", 10): 19, ("DequantizeLinear", 13): 19, ("RNN", 1): 7}

#: Attributes of old versions as the newest kernel must read them: (op, version) ->
#: {attribute: None (dropped: the kernel does not take it, and it changes no value) or
#: {old value: value}}. The recurrent ops' output_sequence only made Y optional (version 7
#: made every output optional); GRU-1's schema spells its default direction 'foward'.
_FOR_KERNEL: dict[tuple[str, int], dict[str, Any]] = {
    ("RNN", 1): {"output_sequence": None}, ("GRU", 3): {"output_sequence": None},
    ("GRU", 1): {"output_sequence": None, "direction": {"foward": "forward"}},
    ("LSTM", 1): {"output_sequence": None}}


def _quiet(*_args: Any) -> None:
    return None


def _evaluator_cls():
    from onnx.reference import ReferenceEvaluator

    return ReferenceEvaluator


@functools.cache
def _load(domain: str, op: str, version: int) -> Any:
    """onnx.reference's class for ``op`` at schema ``version``, None when it has no kernel
    (a function body alone is not one: :mod:`.function_body` runs those)."""
    module = _MODULES.get(domain)
    if module is None or op in RANDOM:
        return None
    load_op = importlib.import_module(module).load_op
    version = _LATER_KERNEL.get((op, version), version) if domain == "" else version
    try:
        return load_op(domain, op, version)
    except (NotImplementedError, RuntimeError, ValueError, AssertionError, KeyError):
        return None


def available(domain: str, op: str, version: int) -> bool:
    """Whether onnx.reference has a kernel for ``op`` at schema ``version``."""
    return _load(domain, op, version) is not None


def refusal(domain: str, op: str, version: int) -> str | None:
    """Why an (op, version) opshift has no kernel for cannot run (None: onnx.reference's
    kernel runs it)."""
    if op in RANDOM and domain == "":
        return "no kernel: its values are random (two runs would differ), not evaluated"
    if available(domain, op, version):
        return None
    return "no kernel: neither the opshift evaluator nor onnx.reference implements it"


def _instance(ctx) -> Any:
    cache = ctx.runtime.reference_ops
    hit = cache.get(id(ctx.node))
    if hit is not None:
        return hit[1]
    # onnx.reference's kernel knows the newest schema only: the node gets every default of
    # its own version written out (attributes its version does not have then take the newest
    # defaults, which keep the old behaviour), and attributes that refer to the calling
    # function's are replaced by their values (dropped where the call does not set them)
    node = function_body.node_with_defaults(ctx)
    for name, how in _FOR_KERNEL.get((ctx.op, ctx.version), {}).items() if not ctx.domain else ():
        at = next((a for a in node.attribute if a.name == name), None)
        if at is not None and how is None:
            node.attribute.remove(at)
        elif at is not None and at.s.decode() in how:
            at.s = how[at.s.decode()].encode()
    kind = _load(ctx.domain, ctx.op, ctx.version)
    params = {"log": _quiet, "opsets": dict(ctx.opsets), "verbose": 0, "new_ops": None,
              "evaluator_cls": _evaluator_cls()}
    inst = kind(node, params)
    if ctx.fattrs is None:
        cache[id(ctx.node)] = (ctx.node, inst)  # the same node always builds the same kernel
    return inst


def run(ctx, *inputs) -> list[Any]:
    """Run ``ctx.node`` on ``inputs`` with onnx.reference's kernel for its version."""
    try:
        inst = _instance(ctx)
        kwargs = {"context": dict(ctx.scope)} if inst.need_context() else {}
        results = inst.run(*inputs, **kwargs)
    except Exception as e:  # any failure inside onnx.reference: one line naming the node
        first = (str(e).strip().splitlines() or [""])[0]
        raise ctx.error(f"onnx.reference's kernel failed: {type(e).__name__}: {first}") from e
    # ONNX strings are object arrays (str): some kernels (StringNormalizer, StringConcat of
    # 0-d strings) give numpy's fixed-width ones
    return [r.astype(object) if isinstance(r, np.ndarray) and r.dtype.kind in "US" else r
            for r in results]
