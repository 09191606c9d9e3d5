"""onnx's own backend node tests, run through the evaluator as an ``onnx.backend`` Backend.

Every node test case that onnx generates (``collect_testcases``, ``_expanded`` variants
included) is collected once. A case runs when the evaluator claims everything in it
(``opshift.evaluator.backend.unclaimed``: every node's (op, schema version), in the graph, its
subgraphs and its functions, and every element type); it must then pass with the case's own
tolerances (rtol 1e-3, atol 1e-7, as onnx's runner). The few claimed cases that need training
mode are asserted to be refused with a clear error. Each claimed case is also run, with fresh
random float inputs, through onnxruntime and compared with the evaluator (skipped, with
onnxruntime's message, where onnxruntime cannot load or run it).
"""

from __future__ import annotations

import functools
import warnings
import zlib

import numpy as np
import onnx
import pytest
from conftest import run_onnxruntime
from onnx import TensorProto as TP
from onnx import numpy_helper

from opshift.errors import UnsupportedError
from opshift.evaluator.backend import EvaluatorBackend, unclaimed
from opshift.evaluator.values import held
from opshift.verify import compare
from opshift.verify.comparison import NARROW_FLOATS

#: Claimed cases that ask for training-mode randomness or statistics, which the evaluator
#: refuses by design (inference only). They are asserted to fail with an UnsupportedError.
TRAINING_ONLY = {
    "test_batchnorm_example_training_mode", "test_batchnorm_epsilon_training_mode",
    "test_training_dropout", "test_training_dropout_default", "test_training_dropout_mask",
    "test_training_dropout_default_mask",
}


@functools.cache
def _cases() -> dict[str, object]:
    from onnx.backend.test.case.node import collect_testcases

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {c.name: c for c in collect_testcases(None)}


@functools.cache
def _claimed() -> tuple[str, ...]:
    return tuple(n for n, c in _cases().items() if not unclaimed(c.model))


def _array(v):
    return numpy_helper.to_array(v) if isinstance(v, onnx.TensorProto) else v


def _names():
    return [n for n in _claimed() if n not in TRAINING_ONLY]


def test_claim_rule_is_the_only_exclusion():
    """Every case left out names what it uses that the evaluator really does not support."""
    from opshift.evaluator import supported_ops
    from opshift.evaluator.backend import CLAIMED_TYPES

    table = supported_ops()
    claimed_type_names = {TP.DataType.Name(t) for t in CLAIMED_TYPES}
    claimed = set(_claimed())
    for name, c in _cases().items():
        reasons = unclaimed(c.model)
        assert bool(reasons) == (name not in claimed), name
        for r in reasons:
            if r.startswith("type "):
                assert r[5:] not in claimed_type_names, (name, r)
            elif " value " in r:
                assert not r.startswith("tensor_type"), (name, r)
            else:
                qual, _, ver = r.rpartition("-")
                domain, _, op = qual.rpartition("::")
                assert ver == "?" or int(ver) not in table.get((domain, op), ()), (name, r)
    # The activations and their function bodies are claimed in every version onnx tests.
    for name in ("test_prelu_example", "test_prelu_broadcast", "test_prelu_example_expanded",
                 "test_leakyrelu", "test_leakyrelu_default_expanded", "test_selu",
                 "test_selu_default_expanded_ver18", "test_if", "test_loop11",
                 "test_conv_with_strides_padding", "test_maxpool_2d_ceil",
                 "test_batchnorm_epsilon", "test_gemm_default_no_bias"):
        assert name in claimed, name
    assert len(claimed) > 800


def test_unclaimed_looks_into_subgraphs_and_functions():
    from onnx import helper

    sub = helper.make_graph([helper.make_node("Det", ["x"], ["t"])], "then", [],
                            [helper.make_tensor_value_info("t", TP.FLOAT, None)])
    f = helper.make_function("local", "F", ["X"], ["Y"], [helper.make_node("Unique", ["X"],
                                                                           ["Y"])],
                             [helper.make_opsetid("", 14)])
    g = helper.make_graph(
        [helper.make_node("If", ["c"], ["y"], then_branch=sub, else_branch=sub),
         helper.make_node("F", ["y"], ["z"], domain="local")], "g",
        [helper.make_tensor_value_info("c", TP.BOOL, []),
         helper.make_tensor_value_info("x", TP.COMPLEX64, [2])],
        [helper.make_tensor_value_info("z", TP.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 14),
                                            helper.make_opsetid("local", 1)], functions=[f])
    assert set(unclaimed(m)) == {"Det-11", "Unique-11", "type COMPLEX64"}


@pytest.mark.parametrize("name", _names())
def test_onnx_node_case(name):
    from onnx.backend.test.runner import Runner

    case = _cases()[name]
    rep = EvaluatorBackend.prepare(case.model)
    for inputs, expected in case.data_sets:
        got = rep.run([_array(v) for v in inputs])
        Runner.assert_similar_outputs([_array(v) for v in expected], list(got), rtol=case.rtol,
                                      atol=case.atol)


@pytest.mark.parametrize("name", sorted(TRAINING_ONLY))
def test_training_mode_cases_are_refused(name):
    case = _cases()[name]
    assert name in _claimed()
    rep = EvaluatorBackend.prepare(case.model)
    inputs, _ = case.data_sets[0]
    with pytest.raises(UnsupportedError, match=r"node .*\((BatchNormalization|Dropout)-\d+"):
        rep.run([_array(v) for v in inputs])


# -- cases that need onnx.reference's kernels -------------------------------------------------


@functools.cache
def _borrowing() -> tuple[str, ...]:
    """Cases opshift's own kernels do not cover (element types aside) but onnx.reference's
    kernels complete: the evaluator runs them node by node."""
    from opshift.evaluator.kernels import kernels

    out = []
    for n, c in _cases().items():
        reasons = unclaimed(c.model)
        if reasons and not any(r.startswith("type ") or " value " in r for r in reasons) \
                and kernels(c.model).missing is None:
            out.append(n)
    return tuple(out)


def test_most_unclaimed_cases_run_with_onnx_reference_kernels():
    assert len(_borrowing()) > 500
    assert {"test_erf", "test_resize_upsample_scales_linear", "test_convtranspose",
            "test_layer_normalization_2d_axis0_expanded_ver18"} <= set(_borrowing()) | set(
        _claimed())


@pytest.mark.parametrize("name", _borrowing())
def test_onnx_node_case_with_onnx_reference_kernels(name):
    from onnx.backend.test.runner import Runner

    case = _cases()[name]
    if case.model.graph.node[0].op_type == "ImageDecoder":
        pytest.importorskip("PIL", reason="onnx.reference's ImageDecoder needs Pillow")
    rep = EvaluatorBackend.prepare(case.model)
    for inputs, expected in case.data_sets:
        got = rep.run([_array(v) for v in inputs])
        _assert_similar(Runner, [_array(v) for v in expected], list(got), case)


def _assert_similar(runner, expected, got, case) -> None:
    """onnx's own check of tensors; sequences and optionals (which it cannot compare when
    they hold 0-d tensors) by the project's policy."""
    if all(isinstance(v, np.ndarray) for v in expected):
        runner.assert_similar_outputs(expected, got, rtol=case.rtol, atol=case.atol)
        return
    assert len(got) == len(expected)
    for e, g in zip(expected, got):
        r = compare(e, g)
        assert r.ok, r.reason


# -- onnxruntime cross-check ------------------------------------------------------------------


def _randomize(inputs, rng):
    """Fresh values for float tensors (ints, bools and 0-d floats are usually shapes,
    indices or parameters such as a dropout ratio: kept)."""
    out = []
    for v in inputs:
        v = _array(v)
        if isinstance(v, np.generic):
            v = np.asarray(v)  # onnxruntime wants arrays, not numpy scalars
        if isinstance(v, np.ndarray) and v.ndim and (v.dtype.kind == "f"
                                                     or v.dtype.name == "bfloat16"):
            r = np.asarray(rng.standard_normal(v.shape) * 2, dtype=np.float32)
            v = np.asarray(r.astype(v.dtype))
        out.append(v)
    return out


def _tol(dtype):
    # float16 graphs chain many rounded ops (expanded functions), and ORT accumulates some of
    # them differently; 1e-2 is ~10 float16 ULPs.
    return {"float16": 1e-2, "bfloat16": 2 ** -5}.get(np.dtype(dtype).name, 1e-4)


@pytest.mark.parametrize("name", _names())
def test_matches_onnxruntime(name):
    case = _cases()[name]
    rng = np.random.default_rng(zlib.crc32(name.encode()))  # hash() differs per process
    inputs = _randomize(case.data_sets[0][0], rng)
    want = run_onnxruntime(case.model, inputs)
    got = EvaluatorBackend.prepare(case.model).run(inputs)
    assert len(got) == len(want)
    for g, w, vi in zip(got, want, case.model.graph.output):
        if not isinstance(g, np.ndarray):  # a sequence or optional
            r = compare(held(vi.type, w), g)
            assert r.ok, r.reason
            continue
        if g.dtype in NARROW_FLOATS and w.dtype == np.uint8:  # (onnxruntime gives their bits)
            w = w.view(g.dtype)
            r = compare(w, g)
            assert r.ok, r.reason
            continue
        assert g.dtype == w.dtype and g.shape == w.shape
        if g.dtype.kind in "iub" and g.dtype.name != "bfloat16":
            np.testing.assert_array_equal(g, w)
        else:
            t = _tol(g.dtype)
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=t,
                                       atol=t, equal_nan=True)
