"""Training modes of BatchNormalization and Dropout.

* BatchNormalization **6**: ``consumed_inputs`` is required at 1 (written as all zeros).
* BatchNormalization/Dropout **7**: ``is_test=0`` meant training at <= 6; later versions are
  inference only.
* BatchNormalization **14**: training outputs exist only with ``training_mode=1``.
* Dropout **10**: the mask output is bool, no longer of X's type. In inference the mask is
  all ones, so a mask read by nothing is dropped and a read one is cast to the old type.
* Dropout **12**: ``ratio``/``training_mode`` inputs instead of the ``ratio`` attribute.
"""

from __future__ import annotations

import numpy as np
import onnx

from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step


@at(6, "BatchNormalization")
def bn_consumed_inputs(st: Step) -> None:
    if not st.up and not st.has_attr("consumed_inputs"):
        st.set_attr("consumed_inputs", [0] * len(st.w.input))
        st.note("consumed_inputs (required at 1) written as all zeros: nothing updated "
                "in place")


def _single_output(st: Step, why: str) -> None:
    if len(st.outputs()) > 1:
        raise Refuse(f"outputs beyond Y are training outputs ({why})")


@at(7, "BatchNormalization", "Dropout")
def is_test(st: Step) -> None:
    if st.up:
        if st.attr("is_test", 0) != 1:
            raise Refuse("is_test=0 is training mode before opset 7; later versions are "
                         "inference only")
        st.del_attr("is_test")
        st.note("dropped is_test=1 (inference is the only mode from 7)")
        return
    if st.op == "BatchNormalization":
        _single_output(st, "inference only")
    st.set_attr("is_test", 1)
    st.note("is_test=1 written (the default 0 meant training mode)")


@at(14, "BatchNormalization")
def bn_training_mode(st: Step) -> None:
    if st.up:
        _single_output(st, "BatchNormalization-14 has them only with training_mode=1")
        return
    if st.attr("training_mode", 0) != 0:
        raise Refuse("training_mode=1 has no inference equivalent before 14")
    _single_output(st, "inference only")


# ------------------------------------------------------------------ Dropout


@at(10, "Dropout")
def dropout_mask_type(st: Step) -> None:
    outs = st.outputs()
    if len(outs) < 2:
        return
    mask = outs[1]
    if not st.facts.uses(st.scope, mask):
        del st.edit().output[1:]
        st.note(f"mask output {mask!r}, read by nothing, dropped",
                "its type changes at 10 (bool from 10, X's type before)")
        return
    x_type = st.elem_type(st.input(0))
    if x_type is None:
        raise Refuse(f"the mask {mask!r} is read and the element type of X is unknown (the "
                     "mask has X's type before 10, bool from 10)")
    new_type, old_type = ((onnx.TensorProto.BOOL, x_type) if st.up
                          else (x_type, onnx.TensorProto.BOOL))
    new = st.fresh_value("mask")
    st.edit().output[1] = new
    st.facts.extra_types[new] = new_type
    st.add_cast(new, old_type, "mask_cast", after=True, output=mask)
    st.note(f"mask output {mask!r} cast to {onnx.TensorProto.DataType.Name(old_type)}",
            "in inference the mask is all ones; its type is bool from 10, X's type before")


@at(12, "Dropout")
def dropout_inputs(st: Step) -> None:
    if st.up:
        ratio = st.attr("ratio")
        if ratio is not None:
            st.del_attr("ratio")
            r = st.add_const("ratio", np.array(ratio, np.float32))
            st.set_inputs([st.input(0), r])
            st.note("ratio attribute moved to the ratio input")
        return
    if st.input(2):
        tm = st.need_const(2, "training_mode")
        if bool(tm):
            raise Refuse("training_mode=True has no equivalent before 12")
    if st.input(1):
        ratio = st.need_const(1, "ratio")
        st.set_attr("ratio", float(ratio))
    st.set_inputs([st.input(0)])
    st.note("ratio/training_mode inputs folded into attributes")

