"""ai.onnx.ml versions whose onnx.reference kernel cannot run them: LabelEncoder-1.

LabelEncoder-1 maps strings to their index in ``classes_strings`` (``default_int64`` when
absent; the first index of a string listed twice) and int64 values to the string at that
index (``default_string`` outside the list). Version 2 replaced it by key/value lists, which
is all onnx.reference's kernel takes.
"""

from __future__ import annotations

import numpy as np

from ..registry import op


@op("LabelEncoder", 1, domain="ai.onnx.ml")
def label_encoder_1(ctx, x):
    classes = list(ctx.attrs.get("classes_strings", []))
    flat = x.reshape(-1)
    if x.dtype.kind in "OUS":
        index: dict[str, int] = {}
        for i, name in enumerate(classes):
            index.setdefault(name, i)
        default = ctx.attrs.get("default_int64", -1)
        out = np.array([index.get(str(v), default) for v in flat], np.int64)
    else:
        default = ctx.attrs.get("default_string", "_Unused")
        out = np.array([classes[i] if 0 <= i < len(classes) else default
                        for i in flat.astype(np.int64).tolist()], dtype=object)
    return out.reshape(x.shape)
