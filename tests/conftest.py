"""Shared test helpers."""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"

# opshift lays text out for COLUMNS when it is set; GNU readline (which pytest's pdb imports)
# exports COLUMNS=80 behind os.environ's back, to xdist's workers and every child process.
# The tests want what a pipe gets, the stable width; those about widths set COLUMNS themselves.
for _name in ("COLUMNS", "LINES"):
    os.environ.pop(_name, None)
    os.unsetenv(_name)


def make_model(nodes, inputs, outputs, *, opset: int, initializers=(), functions=(),
               extra_opsets=(), ir_version: int | None = None) -> onnx.ModelProto:
    """A model at ``opset`` with the IR version that opset belongs to."""
    from opshift.opsets import ir_version_for_opset

    graph = helper.make_graph(list(nodes), "g", list(inputs), list(outputs),
                              initializer=list(initializers))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                    *extra_opsets],
                              functions=list(functions))
    model.ir_version = ir_version or ir_version_for_opset(opset)
    return model


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


@functools.cache
def bundled(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """A bundled model with its .npz inputs and expected outputs (bfloat16 arrays, stored as
    uint16 bits, viewed back as bfloat16). Cached: callers must not mutate the model."""
    import ml_dtypes

    m = onnx.load(MODELS / f"{name}.onnx")
    z = np.load(MODELS / f"{name}.npz")
    dtypes = {vi.name: helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
              for vi in [*m.graph.input, *m.graph.output]}

    def arr(key: str) -> np.ndarray:
        v = z[key]
        return v.view(ml_dtypes.bfloat16) if dtypes[key.split(":", 1)[1]] == ml_dtypes.bfloat16 \
            else v

    ins = {k.split(":", 1)[1]: arr(k) for k in z.files if k.startswith("input:")}
    outs = {k.split(":", 1)[1]: arr(k) for k in z.files if k.startswith("output:")}
    return m, ins, outs


@functools.cache
def bundled_at_every_opset(name: str) -> tuple[tuple[int, onnx.ModelProto], ...]:
    """(opset, converted model) for every opset 1..newest the bundled model converts to
    exactly; opsets convert refuses are left out (convert's own tests say why). Cached and
    shared by the inline and fuse round-trip tests: callers must not mutate the models."""
    from opshift.convert import convert
    from opshift.errors import OpshiftError
    from opshift.opsets import MAX_OPSET

    m = bundled(name)[0]
    out = []
    for opset in range(1, MAX_OPSET + 1):
        try:
            out.append((opset, convert(m, opset)))
        except OpshiftError:
            continue
    return tuple(out)


# -- builders shared by the test files ---------------------------------------------------------

def converted(model: onnx.ModelProto, target: int) -> onnx.ModelProto:
    """A copy of ``model`` converted to opset ``target`` (``model`` stays as it is), which
    onnx's full checker accepts."""
    from opshift.convert.engine import convert_proto

    c = onnx.ModelProto()
    c.CopyFrom(model)
    convert_proto(c, target)
    onnx.checker.check_model(c, full_check=True)
    return c


def digest(p) -> str:
    """The sha256 of the file at ``p`` (that a command left a file as it was)."""
    return hashlib.sha256(p.read_bytes()).hexdigest()


def op_types(m: onnx.ModelProto) -> list[str]:
    """The op types of ``m``'s main graph, in node order."""
    return [n.op_type for n in m.graph.node]


def vi(name: str, elem: int = onnx.TensorProto.FLOAT, shape=None) -> onnx.ValueInfoProto:
    """A tensor value info. ``shape``: None for an unknown rank, an int for that rank with
    unknown dims, else the dims (ints or dim_param names)."""
    if isinstance(shape, int):
        shape = [None] * shape
    return helper.make_tensor_value_info(name, elem, None if shape is None else list(shape))


def vi_of(name: str, a: np.ndarray) -> onnx.ValueInfoProto:
    """A tensor value info of array ``a``'s element type and shape."""
    return vi(name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))


def attrs(n: onnx.NodeProto) -> dict:
    """A node's attributes by name, their values as onnx.helper reads them."""
    return {a.name: helper.get_attribute_value(a) for a in n.attribute}


def init(name: str, value, dtype=None) -> onnx.TensorProto:
    """An initializer holding ``value`` (as ``dtype`` when given)."""
    from onnx import numpy_helper

    return numpy_helper.from_array(np.asarray(value, dtype=dtype), name)


def weighted_model(op: str, x_shape, w, b, dtype, *, opset: int, name: str,
                   **attrs) -> onnx.ModelProto:
    """One ``op`` node (Conv, ConvTranspose) reading input X of ``x_shape`` and the
    initializers W and, when given, B, all in ``dtype``; output Y."""
    el = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    inits = [init("w", w, dtype)] + ([init("b", b, dtype)] if b is not None else [])
    node = helper.make_node(op, ["x", "w"] + ["b"] * (b is not None), ["y"], name=name,
                            **attrs)
    return make_model([node], [helper.make_tensor_value_info("x", el, list(x_shape))],
                      [helper.make_tensor_value_info("y", el, None)], opset=opset,
                      initializers=inits)


def by_policy(name: str, got, want) -> None:
    """A ``check`` for :func:`assert_onnx_node_tests`: equal under ``verify.compare``."""
    from opshift.verify import compare

    c = compare(want, got)
    assert c.ok, (name, c.reason)


def assert_onnx_node_tests(*prefixes: str, at_least: int, atol: float = 0.0,
                           rtol: float = 0.0, check=None) -> None:
    """opshift's evaluator on onnx's backend node tests whose names start with one of
    ``prefixes`` (at least ``at_least`` outputs): each output of each one's first data set
    in the expected dtype and equal to the expected one (bit for bit; within ``atol`` +
    ``rtol`` where onnx writes them rounded), or passing ``check(name, got, want)``."""
    import warnings

    from onnx import numpy_helper
    from onnx.backend.test.case.node import collect_testcases

    from opshift.evaluator import evaluate

    def array(t):
        return np.asarray(t) if isinstance(t, (np.ndarray, np.generic)) else \
            numpy_helper.to_array(t)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = [c for c in collect_testcases(None) if c.name.startswith(prefixes)]
    seen = 0
    for c in cases:
        inputs, expected = c.data_sets[0]
        got = evaluate(c.model, {v.name: array(t) for v, t in zip(c.model.graph.input, inputs)})
        for v, t in zip(c.model.graph.output, expected):
            name, out, want = f"{c.name}:{v.name}", got[v.name], array(t)
            seen += 1
            assert out.dtype == want.dtype, name
            if check is not None:
                check(name, out, want)
            elif atol or rtol:
                np.testing.assert_allclose(out, want, rtol=rtol, atol=atol, err_msg=name)
            else:
                np.testing.assert_array_equal(out, want, err_msg=name)
    assert seen >= at_least, (prefixes, seen)


def const(name: str, value, dtype=np.float32) -> onnx.NodeProto:
    """A Constant node whose output ``name`` holds ``value`` as ``dtype``."""
    from onnx import numpy_helper

    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.asarray(value, dtype=dtype)))


def legacy_model(model: onnx.ModelProto) -> onnx.ModelProto:
    """Before IR 4 every initializer must also be a graph input: adds the missing ones."""
    if model.ir_version < 4:
        have = {i.name for i in model.graph.input}
        for t in model.graph.initializer:
            if t.name not in have:
                model.graph.input.append(helper.make_tensor_value_info(t.name, t.data_type,
                                                                       list(t.dims)))
    return model


# -- opshift's own comparison policy -----------------------------------------------------------

def assert_exact(want, got, what: str = "", *, signed_zeros: bool = True) -> None:
    """``got`` is ``want`` under opshift's exact policy (``opshift.verify.compare`` with no ulp
    allowed): same dtype and shape, bit for bit, -0.0 apart from +0.0 (unless
    ``signed_zeros=False``), NaN equal to NaN."""
    from opshift.verify import compare

    c = compare(want, got, ulp=0, signed_zeros=signed_zeros)
    assert c.ok, f"{what}: {c.reason}" if what else c.reason


def assert_outputs_exact(want: dict, got: dict, what: str = "", *,
                         signed_zeros: bool = True) -> None:
    """Every output of ``want`` (by name) is exactly the same in ``got`` (see assert_exact)."""
    assert set(got) == set(want), (what, sorted(got), sorted(want))
    for k in want:
        assert_exact(want[k], got[k], f"{what} output {k!r}" if what else f"output {k!r}",
                     signed_zeros=signed_zeros)


def assert_conversion_exact(model: onnx.ModelProto, converted_model: onnx.ModelProto, feeds,
                            meaning=None, output: str = "y") -> None:
    """``converted_model`` computes ``model``'s ``output`` bit for bit on the evaluator (and
    ``model`` computes ``meaning`` there, when given); onnxruntime's output of the converted
    model is the same where it runs it (a second opinion)."""
    from opshift.evaluator import evaluate

    want = evaluate(model, feeds)[output]
    if meaning is not None:
        assert_exact(meaning, want, "the original on the evaluator")
    assert_exact(want, evaluate(converted_model, feeds)[output], "the converted model")
    theirs = onnxruntime_outputs(converted_model, feeds)
    if not isinstance(theirs, str):
        k = [o.name for o in converted_model.graph.output].index(output)
        assert_exact(want, theirs[k], "onnxruntime")


# -- onnxruntime, the second opinion -----------------------------------------------------------

def onnxruntime_outputs(model: onnx.ModelProto, feeds) -> list[np.ndarray] | str:
    """onnxruntime's outputs of ``model`` (in graph output order) for ``feeds`` (a dict by
    name, or a list by input position), or onnxruntime's own reason why it cannot load or run
    the model. onnxruntime is a second opinion: what it cannot do is never asserted."""
    run = onnxruntime_session(model)
    return run if isinstance(run, str) else run(feeds)


def onnxruntime_session(model: onnx.ModelProto):
    """``model`` loaded in onnxruntime once: a function of feeds (as for
    :func:`onnxruntime_outputs`) returning the outputs or onnxruntime's reason why it cannot
    run them; or onnxruntime's reason why it cannot load the model."""
    try:
        import onnxruntime as ort
    except ImportError as e:
        return f"onnxruntime is not installed: {e}"
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts,
                                    providers=["CPUExecutionProvider"])
    except Exception as e:  # whatever it is, it is onnxruntime's own limit
        return f"onnxruntime {ort.__version__} cannot load the model: {_first_line(e)}"
    names = [i.name for i in sess.get_inputs()]

    def run(feeds) -> list[np.ndarray] | str:
        if not isinstance(feeds, dict):
            feeds = dict(zip(names, feeds))
        # numpy scalars as 0-d arrays (onnxruntime takes arrays, sequences and None)
        feeds = {k: np.asarray(v) if isinstance(v, np.generic) else v for k, v in feeds.items()}
        try:
            return sess.run(None, feeds)
        except Exception as e:
            return f"onnxruntime {ort.__version__} cannot run the model: {_first_line(e)}"

    return run


def run_onnxruntime(model: onnx.ModelProto, feeds) -> list[np.ndarray]:
    """onnxruntime's outputs (see onnxruntime_outputs); where it cannot load or run the
    model, the calling test is skipped with onnxruntime's message."""
    __tracebackhide__ = True  # the skip is reported at the caller's line
    out = onnxruntime_outputs(model, feeds)
    if isinstance(out, str):
        pytest.skip(out)
    return out


def _first_line(e: BaseException) -> str:
    lines = str(e).strip().splitlines()
    return (lines[0] if lines else type(e).__name__)[:300]


def block_model(n_nodes: int, opset: int) -> onnx.ModelProto:
    """``n_nodes`` nodes in blocks of Conv(1x1) -> Add -> PRelu|LeakyRelu|Selu, x [1,4,2,2]:
    a large model for the CLI's progress and summary tests."""
    from onnx import TensorProto, numpy_helper

    c = 4
    w = numpy_helper.from_array(np.eye(c, dtype=np.float32).reshape(c, c, 1, 1) * 0.5, "w")
    b = numpy_helper.from_array(np.full([c, 1, 1], 0.1, np.float32), "b")
    s = numpy_helper.from_array(np.linspace(-0.4, 0.4, c, dtype=np.float32).reshape(c, 1, 1),
                                "slope")
    nodes, cur = [], "x"
    for i in range(n_nodes // 3):
        act = ("PRelu", "LeakyRelu", "Selu")[i % 3]
        inputs = [f"a{i}", "slope"] if act == "PRelu" else [f"a{i}"]
        attrs = {"alpha": 0.2} if act == "LeakyRelu" else {}
        nodes += [helper.make_node("Conv", [cur, "w"], [f"c{i}"], name=f"conv{i}"),
                  helper.make_node("Add", [f"c{i}", "b"], [f"a{i}"], name=f"add{i}"),
                  helper.make_node(act, inputs, [f"r{i}"], name=f"act{i}", **attrs)]
        cur = f"r{i}"
    nodes[-1].output[0] = "y"
    shape = [1, c, 2, 2]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
                      opset=opset, initializers=[w, b, s], ir_version=8)


def table_cells(lines: list[str]) -> dict[str, list[str]]:
    """The rows of a ``tables.table`` printout (heading first) as first cell -> cells, each
    wrapped cell joined back (its pieces joined by a space; a word broken across lines by
    the narrowing keeps the space)."""
    head = lines[0]
    starts = [i for i, c in enumerate(head) if c != " " and (i == 0 or head[i - 1] == " ")]
    # a heading of several words: only the starts two spaces (the column gap) apart count
    starts = [i for i in starts if i == 0 or head[i - 2:i] == "  "]
    rows: dict[str, list[str]] = {}
    key = None
    for line in lines[1:]:
        if not line.strip():
            break
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None])]
        if cells[0]:
            key = cells[0]
            rows[key] = cells
        elif key is not None:
            rows[key] = [f"{old} {new}".strip() for old, new in zip(rows[key], cells)]
    return rows


def if_with_marked_branch(mark, ir_version: int) -> onnx.ModelProto:
    """An opset-13 If whose then-branch node ``mark`` edits (gives it an overload, node
    metadata, ...), at IR ``ir_version``: IR features held in a subgraph."""
    h = onnx.helper
    then = h.make_graph([h.make_node("Relu", ["x"], ["t"])], "then", [],
                        [vi("t", onnx.TensorProto.FLOAT, [3])])
    other = h.make_graph([h.make_node("Neg", ["x"], ["e"])], "else", [],
                         [vi("e", onnx.TensorProto.FLOAT, [3])])
    mark(then.node[0])
    return make_model([h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)],
                      [vi("x", onnx.TensorProto.FLOAT, [3]), vi("c", onnx.TensorProto.BOOL, [])],
                      [vi("y", onnx.TensorProto.FLOAT, [3])], opset=13, ir_version=ir_version)
