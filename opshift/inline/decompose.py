"""Which primitive nodes replace one PRelu, LeakyRelu or Selu node: the node's band and
template (:mod:`.templates`), what it needs to know about the node, and the nodes that
cannot be inlined exactly (ConversionError).

PRelu slope placement (:mod:`opshift.broadcast`): at opset >= 7 the slope broadcasts as
numpy does and is used as is. At opset <= 6 (legacy per-channel rule) the slope's
placement is resolved from static shapes: a slope of X's shape is used as is; otherwise
the non-1 span of the placed slope becomes the Mul's B with ``broadcast=1`` and ``axis``
(``axis=1`` for a per-channel slope). A slope of another shape is reshaped to the span: a
constant by a new ``<node>/Slope`` Constant (its doc_string names the slope value, see
:data:`.templates.RESHAPED_SLOPE`); a value that may change at run time (a graph
input, including an initializer that is also an input from IR 4 on) by ``<node>/Slope =
Squeeze(slope, axes=<its 1-dims outside the span>)``. A placement legacy Mul cannot express
(:func:`opshift.broadcast.legacy_placement`: a 1 against a larger dim, or an unknown dim,
inside the span) raises ConversionError.

Only a slope that cannot change at run time chooses the Max/Min forms by its values: a
constant as :meth:`opshift.graph.facts.Facts.constant` sees it from the node's scope (a
Constant node, or an initializer that is not a graph input, of that scope or an enclosing
graph; below IR 4 every initializer, which must be listed as an input too). Any other slope
(a graph input, an initializer that is also an input from IR 4 on, a computed value) is
refused at opsets 1..8: the
``Relu(x) - slope*Relu(-x)`` form gives NaN where the slope is +-inf or NaN and x >= 0
(``0*inf``), so it is exact only for finite slopes; ``allow_nonfinite_slope`` accepts it, and
the node's :attr:`Site.note` says so.

Element types: every type an op accepts at an opset is accepted there by the primitives
used (bfloat16 exists for the ops only from opset 16/22, integers for PRelu from 9); a node
whose type the primitives do not accept raises ConversionError. A float16/bfloat16 LeakyRelu
or Selu computes in float32 and rounds once: its template is the float32 one between Casts
(:func:`.templates.in_float32`), refused where Cast at the opset cannot convert the type.
Where X's element type is not known, a body that would be wrong for a 16-bit X (Selu, a
LeakyRelu whose alpha a 16-bit type does not hold) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import helper

from opshift import opsets
from opshift.broadcast import SlopeRule, legacy_placement, slope_shape_for
from opshift.errors import ConversionError, EvaluationError, where
from opshift.graph.cast import cast_supports
from opshift.graph.edit import axes_nodes, constant_node
from opshift.graph.names import Names
from opshift.inline.templates import (
    FUNCTION,
    LEGACY,
    NARROW,
    RESHAPED_SLOPE,
    STATIC,
    Ref,
    Template,
    band,
    function_template,
    in_float32,
    instantiate,
    legacy_leaky_template,
    legacy_selu_template,
    static_template,
)


def attributes(node: onnx.NodeProto, op: str, version: int) -> dict[str, float | Ref]:
    """alpha/gamma of ``node``: its own, else the defaults of ``op`` at schema ``version``.

    (Selu-1's defaults differ from Selu-6's.) Inside a function body an attribute may be a
    reference (``alpha=@a``): it is returned as ``Ref('a')``.
    """
    out: dict[str, float | Ref] = {
        k: float(v) for k, v in opsets.attribute_defaults(op, version).items()
        if k in ("alpha", "gamma")}
    for a in node.attribute:
        if a.name in ("alpha", "gamma"):
            out[a.name] = Ref(a.ref_attr_name) if a.ref_attr_name else float(a.f)
    return out


@dataclass
class Site:
    """One node to decompose and what is statically known about it."""

    node: onnx.NodeProto
    version: int  # schema version of the op in force
    opset: int  # default-domain opset of the node's scope
    elem_type: int  # X's TensorProto element type (0 if unknown)
    x_shape: tuple | None = None
    slope_shape: tuple | None = None
    slope_value: np.ndarray | None = None  # constant slope, if known
    graph: str | None = None
    #: accept a run-time slope at opsets 1..8 (exact only for finite slopes)
    allow_nonfinite_slope: bool = False
    note: str = ""  # set by :func:`decompose` when it accepted such a slope

    def where(self) -> str:
        return where(self.node, version=self.version, graph=self.graph)


def band_template(site: Site) -> Template:
    """The template for ``site`` in the *function* and *static* bands (it depends only on the
    op, its version, its alpha/gamma and, for *static*, X's element type); ConversionError
    when the site cannot be inlined there."""
    op = site.node.op_type
    attrs = attributes(site.node, op, site.version)
    b = band(site.opset)
    if b == FUNCTION:
        _type_generic_check(site, attrs)
        t = function_template(op, tuple(sorted(attrs.items())))
    elif b == STATIC:
        _typed_band_checks(site, attrs)
        et = onnx.TensorProto.FLOAT if _in_float32(site) else site.elem_type
        t = static_template(op, tuple(sorted(attrs.items())), et)
    else:
        raise AssertionError(f"band_template: opset {site.opset} is in the legacy band")
    return in_float32(t, site.elem_type, site.opset) if _in_float32(site) else t


def _in_float32(site: Site) -> bool:
    """Whether ``site`` is a 16-bit LeakyRelu/Selu, computed in float32 between Casts; a
    ConversionError when Cast at the site's opset cannot convert its type both ways."""
    if site.node.op_type == "PRelu" or site.elem_type not in NARROW:
        return False
    f32 = onnx.TensorProto.FLOAT
    if not (cast_supports(site.elem_type, f32, site.opset)
            and cast_supports(f32, site.elem_type, site.opset)):
        raise ConversionError(
            f"{site.where()}: cannot inline at opset {site.opset}: "
            f"{opsets.tensor_type_name(site.elem_type)} {site.node.op_type} computes in float "
            "and Cast there cannot convert between the two")
    return True


def _type_generic_check(site: Site, attrs: dict[str, float | Ref]) -> None:
    """In the function band X's type is looked up for LeakyRelu and Selu only: where it is
    not known, the CastLike body is exact for every type only for a LeakyRelu whose alpha
    float16 and bfloat16 both hold (then the body's per-step 16-bit product is the float32
    product rounded once)."""
    op = site.node.op_type
    if site.elem_type or op == "PRelu":
        return
    if op == "LeakyRelu" and not isinstance(attrs["alpha"], Ref) and all(
            _typed(attrs["alpha"], t) == float(np.float32(attrs["alpha"])) for t in NARROW):
        return
    raise ConversionError(
        f"{site.where()}: cannot inline at opset {site.opset}: the element type of X is not "
        f"known, and a float16/bfloat16 {op} computes in float between Casts (its function "
        "body would round every step)")


def _typed_band_checks(site: Site, attrs: dict[str, float | Ref]) -> None:
    """Refusals shared by the bands without CastLike."""
    if not site.elem_type:
        raise ConversionError(f"{site.where()}: cannot inline at opset {site.opset}: the "
                              "element type of X is not known")
    refs = [f"{k}=@{v}" for k, v in attrs.items() if isinstance(v, Ref)]
    if refs:
        raise ConversionError(
            f"{site.where()}: cannot inline at opset {site.opset}: attribute reference "
            f"{', '.join(refs)} needs CastLike (opset >= 15); inline the function first "
            "(--functions)")


def decompose(site: Site, base: str, names: Names) -> list[onnx.NodeProto]:
    """The primitive nodes replacing ``site.node`` at ``site.opset`` (see the module
    docstring and :mod:`.templates`), their names made unique by ``names``."""
    node = site.node
    op = node.op_type
    x, y = node.input[0], node.output[0]
    slope = node.input[1] if op == "PRelu" else None
    if band(site.opset) != LEGACY:
        return instantiate(band_template(site), x, y, base, names, slope)
    attrs = attributes(node, op, site.version)
    _typed_band_checks(site, attrs)
    if site.elem_type not in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16,
                              onnx.TensorProto.DOUBLE):
        raise ConversionError(
            f"{site.where()}: cannot inline at opset {site.opset}: element type "
            f"{opsets.tensor_type_name(site.elem_type)} is not accepted by Relu/Max/Mul there")

    def refuse_non_finite(what: str, elem_type: int) -> None:
        raise ConversionError(
            f"{site.where()}: cannot inline at opset {site.opset}: {what} is infinite or NaN "
            f"in {opsets.tensor_type_name(elem_type)}, and without Where the legacy "
            "forms would turn x >= 0 into NaN")

    if op in ("Selu", "LeakyRelu"):
        wide = _in_float32(site)
        et = onnx.TensorProto.FLOAT if wide else site.elem_type
        a = _typed(attrs["alpha"], et)
        if not np.isfinite(a):
            refuse_non_finite("alpha", et)
        if op == "Selu":
            tpl = legacy_selu_template(attrs["alpha"], attrs["gamma"], et, site.opset)
        else:
            tpl = legacy_leaky_template(_kind(np.array([a])), attrs["alpha"], et, site.opset)
        if wide:
            tpl = in_float32(tpl, site.elem_type, site.opset)
        return instantiate(tpl, x, y, base, names)
    # PRelu
    extra: list[onnx.NodeProto] = []
    axis, broadcast = None, True
    if site.opset <= 6:
        extra, slope, axis, broadcast = _legacy_slope(site, base, names)
    kind = "sub"
    if site.slope_value is None:
        _runtime_slope(site)
    else:
        with np.errstate(over="ignore"):
            values = np.asarray(site.slope_value).astype(
                helper.tensor_dtype_to_np_dtype(site.elem_type))
        if not np.all(np.isfinite(values)):
            refuse_non_finite("a slope element", site.elem_type)
        kind = _kind(values)
    tpl = legacy_leaky_template(kind, None, site.elem_type, site.opset, axis, broadcast,
                                "Slope")
    return extra + instantiate(tpl, x, y, base, names, slope)


def _runtime_slope(site: Site) -> None:
    """Refuse a slope that may change at run time, or note why it was accepted."""
    why = (f"the slope is not a constant: the opset-{site.opset} form gives NaN where the "
           "slope is +-inf or NaN and x >= 0")
    if not site.allow_nonfinite_slope:
        raise ConversionError(f"{site.where()}: cannot inline at opset {site.opset}: {why}; "
                              "--allow-nonfinite-slope (allow_nonfinite_slope=True) accepts "
                              "that")
    site.note = f"{site.where()}: {why} (accepted: --allow-nonfinite-slope)"


def _kind(values: np.ndarray) -> str:
    """'max' when every element is in (0, 1], 'min' when every element is > 1, else 'sub'."""
    if values.size and bool(np.all(values > 0)) and bool(np.all(values <= 1)):
        return "max"
    if values.size and bool(np.all(values > 1)):
        return "min"
    return "sub"


def _typed(value: float, elem_type: int) -> float:
    dtype = helper.tensor_dtype_to_np_dtype(elem_type)
    return float(np.array(np.float32(value)).astype(dtype).astype(np.float64))


def _legacy_slope(site: Site, base: str, names
                  ) -> tuple[list[onnx.NodeProto], str, int | None, bool]:
    """Resolve a PRelu slope for opset <= 6: (extra nodes, slope value name, axis, broadcast)."""
    node = site.node
    x_shape, s_shape = site.x_shape, site.slope_shape
    if s_shape is not None and x_shape is not None and tuple(s_shape) == tuple(x_shape):
        return [], node.input[1], None, False
    if s_shape is not None and all(isinstance(d, int) for d in s_shape) \
            and int(np.prod(s_shape, dtype=np.int64)) == 1:
        return [], node.input[1], None, True
    if x_shape is None or s_shape is None:
        raise ConversionError(
            f"{site.where()}: cannot inline legacy PRelu: the shapes of X and slope are not "
            "statically known, so the per-channel placement of the slope cannot be resolved")
    try:
        placed = slope_shape_for(x_shape, s_shape, SlopeRule.LEGACY)
    except EvaluationError as e:
        raise ConversionError(f"{site.where()}: cannot inline: {e}") from None
    p = legacy_placement(x_shape, placed)
    if isinstance(p, str):
        raise ConversionError(
            f"{site.where()}: cannot inline at opset {site.opset}: slope shape "
            f"{list(s_shape)} placed as {list(placed)} on X {list(x_shape)}: legacy Mul "
            f"broadcasting cannot express it ({p})")
    if tuple(s_shape) == p.shape:
        return [], node.input[1], p.axis, True
    name = names.fresh(f"{base}/Slope")
    if site.slope_value is None:  # at run time: Squeeze drops the 1-dims outside the run
        pad = len(placed) - len(s_shape)  # placed is the slope with leading 1s here
        axes = [j - pad for j in p.drop if j >= pad]
        return axes_nodes("Squeeze", node.input[1], name, axes, site.opset, names), name, \
            p.axis, True
    reshaped = constant_node(name, np.asarray(site.slope_value).reshape(p.shape), name)
    reshaped.doc_string = RESHAPED_SLOPE + node.input[1]
    return [reshaped], name, p.axis, True
