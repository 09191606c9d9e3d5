"""Variances written in two passes where a function body computes them in one.

The bodies onnx gives LayerNormalization, GroupNormalization and MeanVarianceNormalization
compute the variance as ``mean(x * x) - mean(x) ** 2``: in float32 the two means of values
with a large common offset (activations of 100 + N(0, 1)) round to within an ulp of
``mean(x) ** 2`` each and their difference keeps few correct bits (measured: LayerNormalization
of 100 + N(0, 1) over 768 values off float64 by 3.0e-4 of the output's range on opshift's
evaluator, 8.5e-4 on onnxruntime 1.32; in two passes 5.3e-7 and 2.4e-6).
PyTorch's kernels and its opset-13 export of layer_norm compute ``mean((x - mean(x)) ** 2)``,
whose subtraction is exact for such values (onnxruntime's fused LayerNormalization is as close
to float64, 5.3e-7), so a body written
below its op's first version gets that form (:func:`two_pass_variance`): the same value in
real numbers, a better one in float32.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper


def two_pass_variance(nodes: list[onnx.NodeProto], fresh: Callable[[str], str],
                      outputs: set[str]) -> tuple[list[onnx.NodeProto], int]:
    """``nodes`` (a body, in order) with each ``Sub(ReduceMean(x * x), m * m)`` where
    ``m = ReduceMean(x)`` alike (squares as ``Mul(v, v)`` or ``Pow(v, 2)``) written as
    ``ReduceMean((x - m) * (x - m))``, and the nodes only it read left out (never one making
    one of ``outputs``, the node's); ``fresh`` names new values and nodes. Returns the nodes
    and how many variances were rewritten."""
    made = {o: n for n in nodes for o in n.output if o}
    twos = {n.output[0] for n in nodes if n.op_type == "Constant" and _is_two(n)}

    def square_of(v: str) -> str | None:
        n = made.get(v)
        if n is None or len(n.input) != 2:
            return None
        if n.op_type == "Mul" and n.input[0] == n.input[1] or (
                n.op_type == "Pow" and n.input[1] in twos):
            return n.input[0]
        return None

    out: list[onnx.NodeProto] = []
    replaced: list[onnx.NodeProto] = []
    for n in nodes:
        mean_of_square = made.get(n.input[0]) if n.op_type == "Sub" else None
        x = m = None
        if mean_of_square is not None and mean_of_square.op_type == "ReduceMean":
            x, m = square_of(mean_of_square.input[0]), square_of(n.input[1])
        mean = made.get(m) if m else None
        if (x is None or mean is None or mean.op_type != "ReduceMean" or mean.input[0] != x
                or mean.input[1:] != mean_of_square.input[1:]
                or mean.attribute != mean_of_square.attribute):
            out.append(n)
            continue
        deviation, squared = fresh("deviation"), fresh("squared_deviation")
        reduce = onnx.NodeProto()
        reduce.CopyFrom(mean_of_square)
        reduce.input[0] = squared
        del reduce.output[:]
        reduce.output.extend(n.output)
        reduce.name = n.name
        out += [helper.make_node("Sub", [x, m], [deviation], name=fresh(n.name + "_deviation")),
                helper.make_node("Mul", [deviation, deviation], [squared],
                                 name=fresh(n.name + "_square")),
                reduce]
        replaced += [mean_of_square, made[mean_of_square.input[0]], made[n.input[1]]]
    return _without_unread(out, replaced, outputs), len(replaced) // 3


def _is_two(n: onnx.NodeProto) -> bool:
    a = next((a for a in n.attribute if a.name == "value"), None)
    return (a is not None and a.t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE,
                                                onnx.TensorProto.FLOAT16)
            and bool(np.all(numpy_helper.to_array(a.t) == 2)))


def _without_unread(nodes: list[onnx.NodeProto], candidates: list[onnx.NodeProto],
                    outputs: set[str]) -> list[onnx.NodeProto]:
    """``nodes`` less those of ``candidates`` (and the nodes feeding only them) whose
    outputs nothing among ``nodes`` reads."""
    made = {o: n for n in nodes for o in n.output if o}
    dropped: set[int] = set()
    todo = list(candidates)
    while todo:
        c = todo.pop()
        if id(c) in dropped:
            continue
        read = {i for n in nodes if id(n) not in dropped for i in n.input} | outputs
        if any(o in read for o in c.output if o):
            continue
        dropped.add(id(c))
        todo += [made[i] for i in c.input if i in made]
    return [n for n in nodes if id(n) not in dropped]
