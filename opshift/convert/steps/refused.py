"""Features that exist only from a newer version and have no older exact form: refused going
down. If **11** (branches giving outputs of different shapes), Pad **19** (mode 'wrap'),
ScatterND/ScatterElements **18** (reduction min/max), GroupNormalization **21** (per-group vs
per-channel scale, both ways), Mod **28** (fmod=0 on floating-point values).
"""

from __future__ import annotations

import onnx

from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step
from opshift.opsets import INTEGER_TYPES


@at(11, "If")
def if_branch_shapes(st: Step) -> None:
    """Before If-11 both branches must give each output in one shape: refused where their
    shapes (declared or worked out) differ in rank or in a dim both know (a model whose
    then-branch squeezes what the else-branch passes on, as PyTorch's exports of
    ``if x.dim() == 3`` write, no runtime loads below 11) unless the shapes decide the
    condition (:mod:`..taken_branch`)."""
    if st.up:
        return
    branches = {a.name: a.g for a in st.w.attribute if a.type == onnx.AttributeProto.GRAPH}
    then, other = branches.get("then_branch"), branches.get("else_branch")
    if then is None or other is None:
        return
    for k, (a, b) in enumerate(zip(then.output, other.output)):
        sa, sb = st.shape(a.name), st.shape(b.name)
        if sa is None or sb is None:
            continue
        if len(sa) != len(sb) or any(isinstance(x, int) and isinstance(y, int) and x != y
                                     for x, y in zip(sa, sb)):
            raise Refuse(f"its branches give output {k} in shapes {list(sa)} and {list(sb)}: "
                         "before If-11 both branches must give one shape (where constants and "
                         "the input shapes decide its condition, the branch taken replaces it)")


@at(19, "Pad")
def pad_wrap(st: Step) -> None:
    if not st.up and st.attr("mode", b"constant") in (b"wrap", "wrap"):
        raise Refuse("mode 'wrap' exists only from Pad-19")


@at(18, "ScatterND", "ScatterElements")
def scatter_min_max(st: Step) -> None:
    red = st.attr("reduction", b"none")
    if not st.up and red in (b"min", b"max", "min", "max"):
        raise Refuse(f"reduction={red!r} exists only from {st.op}-18")


@at(21, "GroupNormalization")
def groupnorm_scale(st: Step) -> None:
    raise Refuse("scale and bias are per group at 18 and per channel at 21")


@at(28, "Mod")
def mod_floor_of_floats(st: Step) -> None:
    if st.up or st.attr("fmod", 0):
        return
    elem = st.elem_type(st.input(0))
    if elem not in INTEGER_TYPES:  # Mod's types for fmod=0 before 28
        what = "values of unknown type" if elem is None else "floating-point values"
        raise Refuse(f"fmod=0 on {what}: Mod takes the floored remainder of floats only from "
                     "Mod-28 (before, fmod=0 is for integers)")
