"""The PRelu slope broadcasting rules, as one piece of code.

Three semantics describe how a slope tensor meets X (see ``shared/specs``):

* **numpy** (ONNX PRelu >= 7, oneDNN Graph with ``per_channel_broadcast=False``): the slope
  is unidirectionally broadcast to X, aligned from the last axis.
* **per-channel on axis 1** (legacy ONNX PRelu 1 and 6, Caffe2 and PyTorch opset-6 exports,
  oneDNN Graph ``per_channel_broadcast=True`` with ``data_format=NCX``): a 1-D slope whose
  length is X's channel count applies along axis 1.
* **per-channel on the last axis** (oneDNN Graph ``data_format=NXC``): a 1-D slope applies
  along the last axis.

:func:`slope_shape_for` answers "to which shape of rank ``len(x_shape)`` must the slope be
reshaped so that plain numpy broadcasting computes the op", for any of them;
:func:`legacy_placement` answers how legacy binary-op broadcasting (opset <= 6
``broadcast``/``axis``) reads an operand placed that way, or why it cannot.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from opshift.errors import EvaluationError

Dim = int | str | None  # str/None: symbolic or unknown


class SlopeRule(enum.Enum):
    NUMPY = "numpy"
    LEGACY = "legacy"  # ONNX PRelu 1/6: per-channel on axis 1, else numpy, else error
    NCX = "ncx"  # oneDNN per_channel_broadcast with NCX: a 1-D slope must match axis 1
    NXC = "nxc"  # oneDNN per_channel_broadcast with NXC: a 1-D slope must match the last axis


class SlopeClass(enum.Enum):
    """How a slope meets X, for reports and for choosing a conversion."""

    SHARED = "shared"  # one value for every element
    CHANNEL_AXIS1 = "per-channel axis 1"  # legacy ONNX <= 6, oneDNN NCX
    CHANNEL_LAST = "per-channel last axis"  # oneDNN NXC, numpy 1-D
    ELEMENTWISE = "elementwise"  # any other numpy broadcast


#: The first PRelu schema version that broadcasts the slope the numpy way.
NUMPY_SINCE = 7


def rule_for_version(version: int) -> SlopeRule:
    """The slope rule of PRelu at schema ``version``."""
    return SlopeRule.LEGACY if version < NUMPY_SINCE else SlopeRule.NUMPY


def _size(shape: Sequence[Dim]) -> int | None:
    n = 1
    for d in shape:
        if not isinstance(d, int):
            return None
        n *= d
    return n


def numpy_shape(x_shape: Sequence[Dim], slope_shape: Sequence[Dim], *,
                proven: bool = False) -> tuple[Dim, ...] | None:
    """Slope shape padded to X's rank if it unidirectionally broadcasts to X, else None.

    A slope dim fits when it is 1 or equals X's dim; two unknown dims (None) are taken as
    equal unless ``proven``, where an unknown slope dim fits nothing but a 1 (rewriters must
    know the result, a reader of a declared model may give it the benefit)."""
    if len(slope_shape) > len(x_shape):
        return None
    pad = len(x_shape) - len(slope_shape)
    for s, x in zip(slope_shape, x_shape[pad:]):
        if not (s == 1 or s == x) or (proven and s is None):
            return None
    return (1,) * pad + tuple(slope_shape)


def slope_shape_for(x_shape: Sequence[Dim], slope_shape: Sequence[Dim],
                    rule: SlopeRule) -> tuple[Dim, ...]:
    """The shape (rank of X) the slope must be reshaped to so numpy broadcasting applies it.

    Raises :class:`EvaluationError` when the slope does not fit X under ``rule``.
    """
    x_shape = tuple(x_shape)
    slope_shape = tuple(slope_shape)
    rank = len(x_shape)
    if rule is not SlopeRule.NUMPY and _size(slope_shape) == 1:
        return (1,) * rank
    if rule is not SlopeRule.NUMPY and len(slope_shape) == 1:
        axis = rank - 1 if rule is SlopeRule.NXC else 1
        if rank >= 2 and slope_shape[0] == x_shape[axis]:
            out: list[Dim] = [1] * rank
            out[axis] = slope_shape[0]
            return tuple(out)
        if rule is not SlopeRule.LEGACY:
            raise EvaluationError(
                f"slope of shape {list(slope_shape)} does not match the channel axis "
                f"({'last' if rule is SlopeRule.NXC else '1'}) of X with shape {list(x_shape)}")
    shape = numpy_shape(x_shape, slope_shape)
    if shape is None:
        known = all(isinstance(d, int) for d in x_shape + slope_shape)
        raise EvaluationError(
            f"slope of shape {list(slope_shape)} "
            f"{'does not' if known else 'is not known to'} broadcast to X with shape "
            f"{list(x_shape)} ({rule.value} rule)")
    return shape


def classify(x_shape: Sequence[Dim], slope_shape: Sequence[Dim], rule: SlopeRule) -> SlopeClass:
    """The broadcast class of a slope under ``rule`` (raises if it does not fit)."""
    shape = slope_shape_for(x_shape, slope_shape, rule)
    non1 = [i for i, d in enumerate(shape) if d != 1]
    if not non1:
        return SlopeClass.SHARED
    if len(non1) == 1 and len(shape) >= 2:
        if non1[0] == 1:
            return SlopeClass.CHANNEL_AXIS1
        if non1[0] == len(shape) - 1:
            return SlopeClass.CHANNEL_LAST
    return SlopeClass.ELEMENTWISE


def legacy_is_per_channel(x_shape: Sequence[Dim], slope_shape: Sequence[Dim]) -> bool:
    """True when legacy PRelu (<= 6) reads this slope per channel on axis 1 and numpy
    broadcasting would read it differently (so a conversion across 6/7 must reshape it)."""
    if len(slope_shape) != 1 or _size(slope_shape) == 1 or len(x_shape) < 3:
        return False
    return slope_shape[0] == x_shape[1]


@dataclass(frozen=True)
class Placement:
    """How legacy broadcasting (opset <= 6) reads one operand for the other the way numpy
    broadcasting does: the operand in ``shape`` with ``broadcast=1`` and ``axis`` (None:
    suffix matching, or an operand of size 1, which legacy broadcasting takes whole)."""

    shape: tuple
    axis: int | None
    drop: tuple[int, ...] = ()  # the operand's own axes (all 1) left out of ``shape``


def legacy_placement(big: tuple, small: tuple) -> Placement | str:
    """Where legacy broadcasting places ``small`` for ``big`` as numpy broadcasting does
    (the output keeps ``big``'s shape), or why it cannot.

    The legacy rule: B of size 1, or B's shape a contiguous run of A's shape, equal dim by
    dim, starting at ``axis`` (suffix matching without it). So numpy's B, padded with
    leading 1s to A's rank, fits when its dims other than 1 lie in one run over which it
    equals A; B is then read as that run (outer 1s dropped).
    """
    r, k = len(big), len(small)
    if k > r:
        return f"rank {k} > rank {r}: numpy broadcasting makes the output larger"
    padded = (1,) * (r - k) + tuple(small)
    non1 = [i for i, d in enumerate(padded) if d != 1]
    if not non1:
        return Placement(tuple(small), None)
    lo, hi = non1[0], non1[-1]
    for i in range(lo, hi + 1):
        if padded[i] is None or big[i] != padded[i]:
            return (f"dim {i} is {padded[i]} against {big[i]}: legacy broadcasting needs "
                    f"dims {lo}..{hi} equal (a contiguous run of {list(big)})")
    drop = tuple(j for j in range(k) if not lo <= j + r - k <= hi)
    return Placement(padded[lo:hi + 1], None if hi == r - 1 else lo, drop)
