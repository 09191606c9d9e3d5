"""Control flow: If, Loop, Scan. Subgraphs run through ``ctx.run_subgraph`` and so see the
values of every enclosing scope."""

from __future__ import annotations

import numpy as np
import onnx

from opshift.errors import LimitError
from opshift.evaluator.ops.common import normalize_axes
from opshift.evaluator.registry import op
from opshift.graph.declared import dims as declared_dims

_VERSIONS = (1, 11, 13, 16, 19, 21, 23, 24, 25)


def _scalar_bool(ctx, v, what: str) -> bool:
    a = np.asarray(v)
    if a.size != 1:
        raise ctx.error(f"{what} must hold one value, got shape {list(a.shape)}")
    return bool(a.reshape(()))


@op("If", *_VERSIONS)
def if_(ctx, cond):
    branch = ctx.attrs["then_branch" if _scalar_bool(ctx, cond, "cond") else "else_branch"]
    outs = ctx.run_subgraph(branch, [])
    if len(outs) != len(ctx.node.output):
        raise ctx.error(f"branch {branch.name!r} has {len(outs)} outputs, the node has "
                        f"{len(ctx.node.output)}")
    return outs


def _empty_like_output(vi: onnx.ValueInfoProto) -> np.ndarray:
    """An empty scan output ([0, *dims]) for a Loop that ran zero iterations."""
    tt = vi.type.tensor_type
    dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type) if tt.elem_type else np.float32
    dims = [d if isinstance(d, int) else 0 for d in declared_dims(tt.shape)]  # (unknown: 0)
    return np.empty([0, *dims], dtype=dtype)


#: The most iterations the evaluator runs of one Loop (a hostile trip count would never end).
MAX_LOOP_ITERATIONS = 1 << 20


@op("Loop", *_VERSIONS)
def loop(ctx, m=None, cond=None, *carried):
    body = ctx.attrs["body"]
    n_carried = len(carried)
    n_scan = len(body.output) - 1 - n_carried
    if n_scan < 0 or len(body.input) != 2 + n_carried:
        raise ctx.error(f"body takes {len(body.input)} inputs and gives {len(body.output)} "
                        f"outputs for {n_carried} loop-carried values")
    trip = None if m is None else int(np.asarray(m).reshape(()))
    go = True if cond is None else _scalar_bool(ctx, cond, "cond")
    if trip is not None and trip > MAX_LOOP_ITERATIONS and go:
        raise LimitError(f"{ctx.where()}: trip count {trip} is over the evaluator's limit of "
                         f"{MAX_LOOP_ITERATIONS} iterations")
    state = list(carried)
    scans: list[list[np.ndarray]] = [[] for _ in range(n_scan)]
    i = 0
    while go and (trip is None or i < trip):
        outs = ctx.run_subgraph(body, [np.array(i, dtype=np.int64), np.array(go), *state])
        go = _scalar_bool(ctx, outs[0], "body condition output")
        state = list(outs[1:1 + n_carried])
        for k, v in enumerate(outs[1 + n_carried:]):
            scans[k].append(v)
        i += 1
        if i > MAX_LOOP_ITERATIONS and go and trip is None:
            raise LimitError(f"{ctx.where()}: still running after {MAX_LOOP_ITERATIONS} "
                             "iterations, the evaluator's limit")
    finals = []
    for k, vs in enumerate(scans):
        if vs:
            shapes = {np.shape(v) for v in vs}
            if len(shapes) > 1:
                raise ctx.error(f"scan output {k} changes shape across iterations: "
                                f"{sorted(map(list, shapes))}")
            finals.append(np.stack(vs))
        else:
            finals.append(_empty_like_output(body.output[1 + n_carried + k]))
    return [*state, *finals]


@op("Scan", 9, 11, 16, 19, 21, 23, 24, 25)
def scan(ctx, *inputs):
    body = ctx.attrs["body"]
    m = ctx.attrs["num_scan_inputs"]
    n = len(inputs) - m
    k = len(body.output) - n
    if n < 0 or k < 0:
        raise ctx.error(f"{len(inputs)} inputs, num_scan_inputs={m}, body has "
                        f"{len(body.output)} outputs")
    xs = inputs[n:]
    in_axes = ctx.attrs.get("scan_input_axes") or [0] * m
    in_dirs = ctx.attrs.get("scan_input_directions") or [0] * m
    out_axes = ctx.attrs.get("scan_output_axes") or [0] * k
    out_dirs = ctx.attrs.get("scan_output_directions") or [0] * k
    in_axes = [normalize_axes([a], x.ndim, ctx)[0] for a, x in zip(in_axes, xs)]
    lengths = {x.shape[a] for a, x in zip(in_axes, xs)}
    if len(lengths) != 1:
        raise ctx.error(f"scan inputs have different lengths {sorted(lengths)}")
    steps = lengths.pop()
    state = list(inputs[:n])
    collected: list[list[np.ndarray]] = [[] for _ in range(k)]
    for t in range(steps):
        slices = [np.take(x, steps - 1 - t if d else t, axis=a)
                  for x, a, d in zip(xs, in_axes, in_dirs)]
        outs = ctx.run_subgraph(body, [*state, *slices])
        state = list(outs[:n])
        for j, v in enumerate(outs[n:]):
            collected[j].append(v)
    results = []
    for j, vs in enumerate(collected):
        if out_dirs[j]:
            vs = vs[::-1]
        if not vs:
            results.append(_empty_like_output(body.output[n + j]))
            continue
        stacked = np.stack(vs)
        axis = normalize_axes([out_axes[j]], stacked.ndim, ctx)[0]
        results.append(np.moveaxis(stacked, 0, axis))
    return [*state, *results]


@op("Scan", 8)
def scan_8(ctx, seq_lens, *inputs):
    """Scan-8: every input and output has a leading batch axis; the scan axis is 1."""
    body = ctx.attrs["body"]
    m = ctx.attrs["num_scan_inputs"]
    n = len(inputs) - m
    k = len(body.output) - n
    if n < 0 or k < 0 or not inputs:
        raise ctx.error(f"{len(inputs)} inputs, num_scan_inputs={m}, body has "
                        f"{len(body.output)} outputs")
    dirs = ctx.attrs.get("directions") or [0] * m
    batch = inputs[0].shape[0]
    if seq_lens is not None and m:
        full = inputs[n].shape[1]
        if np.any(np.asarray(seq_lens) != full):
            raise ctx.unsupported("sequence_lens shorter than the scan axis are not supported")
    states = [[] for _ in range(n)]
    scans = [[] for _ in range(k)]
    for b in range(batch):
        state = [s[b] for s in inputs[:n]]
        xs = [x[b] for x in inputs[n:]]
        steps = xs[0].shape[0] if xs else 0
        outs_b = [[] for _ in range(k)]
        for t in range(steps):
            slices = [x[steps - 1 - t] if d else x[t] for x, d in zip(xs, dirs)]
            outs = ctx.run_subgraph(body, [*state, *slices])
            state = list(outs[:n])
            for j, v in enumerate(outs[n:]):
                outs_b[j].append(v)
        for i, s in enumerate(state):
            states[i].append(s)
        for j, vs in enumerate(outs_b):
            scans[j].append(np.stack(vs) if vs else _empty_like_output(body.output[n + j])[0:0])
    return [*(np.stack(s) for s in states), *(np.stack(s) for s in scans)]
