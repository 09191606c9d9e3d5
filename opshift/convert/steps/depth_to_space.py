"""DepthToSpace **11** (mode): below 11 only DCR exists. mode='CRD' (channel, then the block's
rows and columns: PyTorch's PixelShuffle) is the Reshape -> Transpose -> Reshape the operator
page writes it as, from opset 7:

    x [N, C, H, W] -> [N, C/(b*b), b, b, H, W] -> perm (0, 1, 4, 2, 5, 3) -> [N, C/(b*b), H*b, W*b]

a data movement, exact. The shapes are constants where X's dims are known, else read from X's
shape at run time (its N and H, W; C/(b*b) left to Reshape's -1).
"""

from __future__ import annotations

import numpy as np

from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step


@at(11, "DepthToSpace")
def depth_to_space_crd(st: Step) -> None:
    mode = st.attr("mode", b"DCR")
    if st.up or mode in (b"DCR", "DCR"):
        return
    if st.target < 7:
        raise Refuse("mode 'CRD' below 11 is a Reshape and Transpose of shapes computed "
                     "with int64 arithmetic, written from opset 7")
    b = int(st.attr("blocksize"))
    x = st.input(0)
    shape = st.shape(x)
    if shape is not None and len(shape) != 4:
        raise Refuse(f"X is {len(shape)}-D: DepthToSpace takes 4-D inputs")
    if shape is not None and all(isinstance(d, int) for d in shape):
        n, c, h, w = shape
        if c % (b * b):
            raise Refuse(f"{c} channels are not a multiple of blocksize**2 = {b * b}")
        split = st.add_const("split_shape", np.array([n, c // (b * b), b, b, h, w], np.int64))
        out = st.add_const("out_shape", np.array([n, c // (b * b), h * b, w * b], np.int64))
    else:
        dims = st.add_node("Shape", [x], "shape")
        batch = st.element(dims, 0, "batch", rank1=True)
        hw = st.elements(dims, [2, 3], "hw")
        split = st.add_node("Concat", [batch, st.add_const("channels_block", np.array(
            [-1, b, b], np.int64)), hw], "split_shape", axis=0)
        scaled = st.add_node("Mul", [hw, st.add_const("block", np.array([b], np.int64))],
                             "hw_scaled")
        out = st.add_node("Concat", [batch, st.add_const("channels", np.array(
            [-1], np.int64)), scaled], "out_shape", axis=0)
    blocks = st.add_node("Reshape", [x, split], "blocks")
    moved = st.add_node("Transpose", [blocks], "moved", perm=[0, 1, 4, 2, 5, 3])
    st.add_node("Reshape", [moved, out], "crd", output=st.w.output[0])
    st.remove("mode 'CRD' written as Reshape -> Transpose -> Reshape (the operator's own "
              "definition)", "DepthToSpace takes mode 'CRD' only from opset 11")
