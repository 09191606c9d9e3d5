"""Training modes of BatchNormalization and Dropout across versions
(conversion/steps/training.py): inference converts to every version and back, training is
refused."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import attrs, make_model, vi
from convert_helpers import X234, F, convert_other_ops, one, roundtrip
from onnx import numpy_helper

from opshift.errors import ConversionError


def bn_model(opset, n_out=1, **kw):
    c = 3
    rng = np.random.default_rng(1)
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in (
        ("s", rng.uniform(0.5, 1.5, c)), ("b", rng.uniform(-1, 1, c)),
        ("m", rng.uniform(-1, 1, c)), ("v", rng.uniform(0.5, 2, c)))]
    outs = ["y", "rm", "rv"][:n_out]
    return make_model([one("BatchNormalization", ["x", "s", "b", "m", "v"], outs, **kw)],
                      [vi("x", F, [2, 3, 4])], [vi(o, F, 3) for o in outs],
                      opset=opset, initializers=inits)


def test_batchnorm_down_to_every_version_and_up():
    for target in (14, 9, 7, 6, 1):
        m = bn_model(15, training_mode=0)
        roundtrip(m, 15, target, {"x": X234})
        a = attrs(m.graph.node[0])
        assert ("training_mode" in a) == (target >= 14)
        assert (a.get("is_test") == 1) == (target < 7)
        assert ("consumed_inputs" in a) == (target < 6)
        roundtrip(m, target, 15, {"x": X234})
        assert set(attrs(m.graph.node[0])) <= {"training_mode"}


def test_batchnorm_training_refused():
    with pytest.raises(ConversionError, match=r"BatchNormalization-15 -> 9.*training_mode=1"):
        convert_other_ops(bn_model(15, n_out=3, training_mode=1), 15, 9)
    with pytest.raises(ConversionError, match=r"BatchNormalization-6 -> 9.*is_test=0"):
        convert_other_ops(bn_model(6), 6, 9)


def test_dropout_versions():
    x = X234
    m = make_model([one("Dropout", ["x"], ["y"], ratio=0.3)], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=10)
    roundtrip(m, 10, 13, {"x": x})
    roundtrip(m, 13, 6, {"x": x})
    assert attrs(m.graph.node[0]) == {"ratio": pytest.approx(0.3), "is_test": 1}
    m = make_model([one("Dropout", ["x"], ["y"])], [vi("x", F, [2, 3, 4])],
                   [vi("y", F, [2, 3, 4])], opset=6)
    with pytest.raises(ConversionError, match=r"Dropout-6 -> 13.*is_test=0.*training"):
        convert_other_ops(m, 6, 13)
