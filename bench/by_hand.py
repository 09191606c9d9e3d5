"""The least a Python script can do for a bench case: the same edits as opshift, written by
hand for the bench's models only (no checks, no report, nothing general), as a floor that
says what the edits themselves cost above ``onnx.load`` + ``onnx.save``.

* ``convert-6-17``: opset 6 -> 17 of Conv -> Add -> PRelu blocks: each Add loses
  ``broadcast``; each 1-D slope ``[C]`` read per channel becomes ``[C, 1, 1]`` in place (its
  initializer and its graph input entry; the bench's slopes are read by PRelu nodes only);
  opset 17, IR 8.
* ``fix``: every PRelu (opset 9) whose 1-D slope ``[C]`` is a graph input that only makes
  sense per channel reads it through an ``Unsqueeze`` (axes 1, 2) inserted before it.

usage: python bench/by_hand.py CASE IN OUT
"""

from __future__ import annotations

import sys

import onnx


def _dims(entry: onnx.ValueInfoProto | None) -> list[int]:
    return [] if entry is None else [d.dim_value for d in entry.type.tensor_type.shape.dim]


def convert_6_17(m: onnx.ModelProto) -> None:
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    inputs = {v.name: v for v in g.input}
    infos = {v.name: v for v in g.value_info}
    prelus, other_readers = [], set()
    for n in g.node:
        op = n.op_type
        if op == "PRelu":
            prelus.append(n)
        else:
            other_readers.update(n.input[1:])
            if op == "Add":
                for k, a in enumerate(n.attribute):
                    if a.name == "broadcast":
                        del n.attribute[k]
                        break
    done: set[str] = set()
    for n in prelus:
        x, slope = n.input[0], n.input[1]
        s = inits.get(slope)
        if s is None or slope in done or len(s.dims) != 1:
            continue
        xs = _dims(infos.get(x) or inputs.get(x))
        if len(xs) < 3 or s.dims[0] != xs[1]:
            continue
        if slope in other_readers:
            raise SystemExit(f"slope {slope!r} is read by another op: not a bench model")
        done.add(slope)  # (a shared slope: every reader is a PRelu, reshaped once)
        new = [s.dims[0]] + [1] * (len(xs) - 2)
        s.dims[:] = new
        if slope in inputs:
            shape = inputs[slope].type.tensor_type.shape
            del shape.dim[:]
            for d in new:
                shape.dim.add().dim_value = d
    m.opset_import[0].version = 17
    m.ir_version = 8


def fix(m: onnx.ModelProto) -> None:
    g = m.graph
    entries = {v.name: v for v in g.input}
    entries.update((v.name, v) for v in g.value_info)
    order: list[onnx.NodeProto] = []
    for n in list(g.node):
        if n.op_type == "PRelu":
            xs, ss = _dims(entries.get(n.input[0])), _dims(entries.get(n.input[1]))
            if len(ss) == 1 and len(xs) >= 3 and ss[0] == xs[1] != xs[-1]:
                out = n.input[1] + "_per_channel"
                u = g.node.add(op_type="Unsqueeze", input=[n.input[1]], output=[out],
                               name=out + "/unsqueeze")
                u.attribute.add(name="axes", type=onnx.AttributeProto.INTS, ints=[1, 2])
                n.input[1] = out
                order.append(u)
        order.append(n)
    pos = {id(n): k for k, n in enumerate(order)}
    g.node.sort(key=lambda n: pos[id(n)])  # moves the nodes; a rebuilt list copies them


CASES = {"convert-6-17": convert_6_17, "fix": fix}


def main() -> None:
    case, src, out = sys.argv[1:4]
    m = onnx.load(src)
    CASES[case](m)
    onnx.save(m, out)


if __name__ == "__main__":
    main()
