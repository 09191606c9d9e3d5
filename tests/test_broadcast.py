"""The PRelu slope rules of shared/specs, as one helper: ONNX <= 6, ONNX >= 7, oneDNN NCX/NXC."""

from __future__ import annotations

import numpy as np
import pytest

from opshift.broadcast import (
    SlopeClass,
    SlopeRule,
    classify,
    legacy_is_per_channel,
    numpy_shape,
    rule_for_version,
    slope_shape_for,
)
from opshift.errors import EvaluationError


def _apply(x, slope, rule):
    return np.where(x < 0, x * slope.reshape(slope_shape_for(x.shape, slope.shape, rule)), x)


@pytest.mark.parametrize("x_shape, slope_shape, benefit, proven", [
    ((1, 3, 4, 4), (4,), (1, 1, 1, 4), (1, 1, 1, 4)),
    ((1, 3, 4, 4), (3, 1, 1), (1, 3, 1, 1), (1, 3, 1, 1)),
    ((1, 3, 4, 4), (3,), None, None),
    ((1, 3, 4), (2, 1, 3, 4), None, None),
    ((1, "C", 4), ("C", 1), (1, "C", 1), (1, "C", 1)),
    ((1, None, 4), (None, 1), (1, None, 1), None),  # unknown fits unknown only by benefit
    ((1, None, 4), (3, 1), None, None),
    ((1, 3, 4), (1, None), None, None),
    ((1, 3, None), (None,), (1, 1, None), None),
    ((2, 3), (1, 1), (1, 1), (1, 1)),
])
def test_numpy_shape_pads_to_x_rank_and_proven_refuses_unknown_slope_dims(
        x_shape, slope_shape, benefit, proven):
    assert numpy_shape(x_shape, slope_shape) == benefit
    assert numpy_shape(x_shape, slope_shape, proven=True) == proven


def test_rule_for_version_switches_at_7():
    assert [rule_for_version(v) for v in (1, 6, 7, 9, 16)] == [
        SlopeRule.LEGACY, SlopeRule.LEGACY, SlopeRule.NUMPY, SlopeRule.NUMPY, SlopeRule.NUMPY]


def test_legacy_per_channel_reads_axis_1_even_when_last_axis_matches():
    x = -np.arange(1, 1 + 2 * 3 * 3, dtype=np.float32).reshape(2, 3, 3)
    slope = np.array([1, 10, 100], np.float32)
    legacy = _apply(x, slope, SlopeRule.LEGACY)
    numpy_ = _apply(x, slope, SlopeRule.NUMPY)
    # per channel: every element of channel c is scaled by slope[c]
    np.testing.assert_array_equal(legacy, x * slope[None, :, None])
    np.testing.assert_array_equal(numpy_, x * slope[None, None, :])
    assert not np.array_equal(legacy, numpy_)


@pytest.mark.parametrize("rule", [SlopeRule.LEGACY, SlopeRule.NCX, SlopeRule.NXC])
def test_size_one_slope_is_shared(rule):
    assert slope_shape_for((2, 3, 4, 5), (1,), rule) == (1, 1, 1, 1)
    assert slope_shape_for((2, 3, 4, 5), (1, 1), rule) == (1, 1, 1, 1)


def test_nxc_per_channel_is_last_axis():
    assert slope_shape_for((2, 4, 4, 3), (3,), SlopeRule.NXC) == (1, 1, 1, 3)
    with pytest.raises(EvaluationError, match="channel axis"):
        slope_shape_for((2, 3, 4, 5), (3,), SlopeRule.NXC)


def test_ncx_is_strict_about_the_channel_axis():
    assert slope_shape_for((2, 3, 4, 5), (3,), SlopeRule.NCX) == (1, 3, 1, 1)
    with pytest.raises(EvaluationError):
        slope_shape_for((2, 3, 4, 5), (5,), SlopeRule.NCX)


def test_legacy_falls_back_to_numpy_then_errors():
    assert slope_shape_for((2, 3, 4, 5), (5,), SlopeRule.LEGACY) == (1, 1, 1, 5)
    assert slope_shape_for((2, 3, 4, 5), (3, 1, 1), SlopeRule.LEGACY) == (1, 3, 1, 1)
    with pytest.raises(EvaluationError, match="does not broadcast"):
        slope_shape_for((2, 3, 4, 5), (4,), SlopeRule.LEGACY)


def test_numpy_is_unidirectional():
    assert slope_shape_for((2, 3, 4, 5), (4, 1), SlopeRule.NUMPY) == (1, 1, 4, 1)
    with pytest.raises(EvaluationError):
        slope_shape_for((2, 3), (2, 2, 3), SlopeRule.NUMPY)  # slope larger than X
    with pytest.raises(EvaluationError):
        slope_shape_for((2, 3, 4, 5), (3,), SlopeRule.NUMPY)


def test_symbolic_dims_only_match_when_equal():
    assert slope_shape_for(("N", 3, "H", "W"), (3,), SlopeRule.LEGACY) == (1, 3, 1, 1)
    with pytest.raises(EvaluationError):
        slope_shape_for(("N", 3, "H", "W"), (7,), SlopeRule.LEGACY)


@pytest.mark.parametrize(("x", "s", "rule", "cls"), [
    ((2, 3, 4, 4), (1,), SlopeRule.LEGACY, SlopeClass.SHARED),
    ((2, 3, 4, 4), (3,), SlopeRule.LEGACY, SlopeClass.CHANNEL_AXIS1),
    ((2, 3, 4, 4), (3, 1, 1), SlopeRule.NUMPY, SlopeClass.CHANNEL_AXIS1),
    ((2, 4, 4, 3), (3,), SlopeRule.NUMPY, SlopeClass.CHANNEL_LAST),
    ((2, 3, 4, 4), (4, 4), SlopeRule.NUMPY, SlopeClass.ELEMENTWISE),
])
def test_classify(x, s, rule, cls):
    assert classify(x, s, rule) is cls


def test_legacy_is_per_channel():
    assert legacy_is_per_channel((1, 4, 8, 8), (4,))
    assert legacy_is_per_channel((1, 4, 8, 4), (4,))  # both readings: legacy means axis 1
    assert not legacy_is_per_channel((1, 4), (4,))  # rank 2: axis 1 is the last axis
    assert not legacy_is_per_channel((1, 4, 8, 8), (1,))
    assert not legacy_is_per_channel((1, 4, 8, 8), (4, 1, 1))
