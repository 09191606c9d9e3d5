"""Resampling ops.

* Resize **11** (Resize-10 is asymmetric sampling with floor rounding), **13** (roi/scales
  optional: written absent going up where Resize-11 never reads them), **19**
  (half_pixel_symmetric); Upsample **7** (height/width_scale -> scales, mode bilinear ->
  linear), **9** (scales input);
* GridSample **20** (mode names bilinear/bicubic -> linear/cubic); RoiAlign **16** (the old
  behaviour is coordinate mode 'output_half_pixel').
"""

from __future__ import annotations

import numpy as np

from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step, text
from opshift.convert.steps.attribute_inputs import attr_to_input, input_to_attr


@at(20, "GridSample")
def gridsample_mode(st: Step) -> None:
    names = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest"}
    if not st.up:
        names = {v: k for k, v in names.items()}
    mode = st.attr("mode", b"bilinear" if st.up else b"linear")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    st.set_attr("mode", names[mode])
    if not st.up and st.rank(st.input(0)) not in (None, 4):
        raise Refuse("GridSample-16 takes only 4-D inputs")


@at(16, "RoiAlign")
def roialign_mode(st: Step) -> None:
    if st.up:
        st.set_attr("coordinate_transformation_mode", "output_half_pixel")
        st.note("coordinate_transformation_mode='output_half_pixel' (RoiAlign-10's behaviour)")
        return
    mode = st.attr("coordinate_transformation_mode", b"half_pixel")
    if mode not in (b"output_half_pixel", "output_half_pixel"):
        raise Refuse(f"coordinate_transformation_mode={mode!r} does not exist at RoiAlign-10")
    st.del_attr("coordinate_transformation_mode")


@at(11, "Resize")
def resize_10_11(st: Step) -> None:
    # Resize-10 samples asymmetrically (x_in = x_out / scale) and rounds nearest down.
    mode = text(st.attr("mode", b"nearest"))
    if mode == "nearest":
        # Resize-10 does not say how nearest rounds when shrinking (onnxruntime takes ceil).
        scales = st.need_const(1 if st.up else 2, "scales of a nearest Resize")
        if (scales < 1).any():
            raise Refuse(f"nearest downsampling (scales {scales.tolist()}) rounds by no "
                         "rule Resize-10 states")
    if st.up:
        st.set_attr("coordinate_transformation_mode", "asymmetric")
        if mode == "nearest":
            st.set_attr("nearest_mode", "floor")
        roi = st.add_const("roi", np.zeros((0,), np.float32))
        st.set_inputs([st.input(0), roi, st.input(1)])
        st.note("Resize-10's asymmetric sampling (and floor rounding) written explicitly")
        return
    ctm = text(st.attr("coordinate_transformation_mode", b"half_pixel"))
    nm = text(st.attr("nearest_mode", b"round_prefer_floor"))
    if ctm != "asymmetric" or mode not in ("nearest", "linear") or (
            mode == "nearest" and nm != "floor"):
        raise Refuse(f"mode={mode!r}, coordinate_transformation_mode={ctm!r}, "
                     f"nearest_mode={nm!r}: Resize-10 samples only asymmetrically with "
                     "floor rounding")
    if st.input(3):
        raise Refuse("sizes exist only from Resize-11")
    scales = st.need_const(2, "scales")
    if scales.size == 0:
        raise Refuse("empty scales")
    for name in ("coordinate_transformation_mode", "nearest_mode"):
        if st.has_attr(name):
            st.del_attr(name)
    st.set_inputs([st.input(0), st.input(2)])
    st.note("asymmetric sampling is Resize-10's own")


@at(13, "Resize")
def resize_optional_inputs(st: Step) -> None:
    if st.up:
        mode = text(st.attr("coordinate_transformation_mode", b"half_pixel"))
        if mode == "tf_half_pixel_for_nn":
            raise Refuse("tf_half_pixel_for_nn does not exist from Resize-13")
        _unread_inputs_absent(st, mode)
        return
    inputs = [st.input(i) for i in range(4)]
    if not inputs[1]:
        inputs[1] = st.add_const("roi", np.zeros((0,), np.float32))
    if not inputs[2]:
        inputs[2] = st.add_const("scales", np.zeros((0,), np.float32))
    st.set_inputs(inputs)


def _unread_inputs_absent(st: Step, mode: str) -> None:
    """Resize-11 takes roi and scales always, read only where they mean something: roi with
    tf_crop_and_resize, scales without sizes (with sizes, scales must be empty). From 13
    either may be absent, and must be for scales beside sizes: onnx and onnxruntime tell an
    empty scales only when it is a constant, not an initializer that is also a graph input
    (IR 4 on), which a caller may feed. Those never read are written absent."""
    inputs = [st.input(i) for i in range(4)]
    dropped = []
    if inputs[1] and mode != "tf_crop_and_resize":
        inputs[1] = ""
        dropped.append("roi (read only with tf_crop_and_resize)")
    if inputs[2] and inputs[3]:
        inputs[2] = ""
        dropped.append("scales (empty beside sizes)")
    if dropped:
        st.set_inputs(inputs)
        st.note(f"{' and '.join(dropped)} written absent",
                "from 13 an unread optional input is written as none")


@at(18, "Resize")
def resize_axes(st: Step) -> None:
    """``axes`` (from 18) names the axes roi, scales and sizes give; the others are not
    resized. Going down, nearest mode spells that out: scale 1 (size: the dim itself, when
    static) and roi [0, 1] on the other axes, which select each element where it is.
    Linear and cubic would weigh its neighbours by 0 there (inf and NaN neighbours then
    show): refused."""
    axes = st.attr("axes")
    if st.up or axes is None:
        return
    mode = text(st.attr("mode", b"nearest"))
    if mode != "nearest":
        raise Refuse(f"axes={axes} with mode={mode!r}: below 18 every axis is interpolated, "
                     "and a weight of 0 on an inf or NaN neighbour is NaN")
    if text(st.attr("keep_aspect_ratio_policy", b"stretch")) != "stretch":
        raise Refuse("keep_aspect_ratio_policy exists only from Resize-18")
    x = st.input(0)
    rank = st.need_rank(x, "axes written out")
    axes = [a + rank if a < 0 else a for a in axes]
    inputs = [x, st.input(1), st.input(2), st.input(3)]
    if inputs[2]:
        scales = st.need_const(2, "scales given for axes")
        full = np.ones(rank, np.float32)
        full[axes] = scales
        inputs[2] = st.add_const("scales", full)
    if inputs[3]:
        sizes = st.need_const(3, "sizes given for axes")
        dims = st.shape(x)
        if dims is None or any(not isinstance(d, int) for i, d in enumerate(dims)
                               if i not in axes):
            raise Refuse(f"sizes for axes {axes} need the other dims of {x!r} (shape "
                         f"{dims}) to be static")
        full_sizes = np.array(dims, np.int64)
        full_sizes[axes] = sizes
        inputs[3] = st.add_const("sizes", full_sizes)
    if inputs[1]:
        roi = st.const(inputs[1])
        if roi is None:
            raise Refuse("roi given for axes is not a constant")
        if roi.size:
            full_roi = np.concatenate([np.zeros(rank), np.ones(rank)]).astype(roi.dtype)
            full_roi[axes] = roi[:len(axes)]
            full_roi[[rank + a for a in axes]] = roi[len(axes):]
            inputs[1] = st.add_const("roi", full_roi)
    st.del_attr("axes")
    if st.has_attr("keep_aspect_ratio_policy"):
        st.del_attr("keep_aspect_ratio_policy")
    st.set_inputs(inputs)
    st.note(f"axes={axes} written out: scale 1 and roi [0, 1] on the other axes")


@at(19, "Resize")
def resize_symmetric(st: Step) -> None:
    mode = st.attr("coordinate_transformation_mode", b"half_pixel")
    if not st.up and mode in (b"half_pixel_symmetric", "half_pixel_symmetric"):
        raise Refuse("half_pixel_symmetric exists only from Resize-19")


@at(7, "Upsample")
def upsample_height_width(st: Step) -> None:
    mode = st.attr("mode", b"nearest")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if st.up:
        h, w = st.attr("height_scale"), st.attr("width_scale")
        if h is None or w is None:
            raise Refuse("Upsample-1 without height_scale/width_scale")
        st.del_attr("height_scale")
        st.del_attr("width_scale")
        st.set_attr("scales", [1.0, 1.0, float(h), float(w)])
        st.note("height_scale/width_scale written as scales (NCHW)")
        if mode == "bilinear":  # Upsample-1's name of what 7 calls linear
            st.set_attr("mode", "linear")
        return
    scales = st.attr("scales")
    if scales is None or len(scales) != 4 or scales[0] != 1 or scales[1] != 1:
        raise Refuse(f"scales={scales}: Upsample-1 scales only H and W of NCHW inputs")
    st.del_attr("scales")
    st.set_attr("height_scale", float(scales[2]))
    st.set_attr("width_scale", float(scales[3]))
    if mode == "linear":
        st.set_attr("mode", "bilinear")


@at(9, "Upsample")
def upsample_scales_input(st: Step) -> None:
    if st.up:
        attr_to_input(st, "scales", 1, dtype=np.float32)
    else:
        input_to_attr(st, 1, "scales", as_int=False)
