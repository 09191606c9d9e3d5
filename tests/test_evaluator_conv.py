"""Conv against onnx.reference on random cases: 1-D, 2-D and 3-D, groups and depthwise,
strides, dilations, explicit pads and every auto_pad, with and without bias, batches.

The evaluator accumulates in float64 and rounds once. onnx.reference runs the same case on
float64 copies of the inputs (so it too sums in float64) and its result is rounded to the
case's type; the two must agree under the project's comparison policy (``verify.compare``).
A float32 sum would not: where the products nearly cancel it is many ulps off (checked
below, so that these comparisons are known to be able to fail).
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from conftest import make_model, weighted_model
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from opshift.errors import EvaluationError
from opshift.evaluator import evaluate
from opshift.verify import compare


def _model(x_shape, w, b, dtype, **attrs):
    return weighted_model("Conv", x_shape, w, b, dtype, opset=22, name="conv", **attrs)


def _case(rng, nd: int, *, group=1, depthwise=False, batch=1, bias=True, auto_pad=None,
          strides=True, dilations=True):
    spatial = [int(rng.integers(5, 12 if nd < 3 else 8)) for _ in range(nd)]
    c = group * int(rng.integers(1, 4)) if not depthwise else group
    m = group * (int(rng.integers(1, 4)) if not depthwise else 1)
    kernel = [int(rng.integers(1, 4)) for _ in range(nd)]
    attrs = {"group": group} if group != 1 else {}
    if strides:
        attrs["strides"] = [int(rng.integers(1, 3)) for _ in range(nd)]
    if dilations:
        attrs["dilations"] = [int(rng.integers(1, 3)) for _ in range(nd)]
    if auto_pad:
        attrs["auto_pad"] = auto_pad
    else:
        attrs["pads"] = [int(rng.integers(0, k + 1)) for k in kernel * 2]
    x = rng.standard_normal([batch, c, *spatial])
    w = rng.standard_normal([m, c // group, *kernel])
    b = rng.standard_normal(m) if bias else None
    return x, w, b, attrs


def _check(x, w, b, attrs, dtype=np.float32):
    xd = x.astype(dtype)
    got = evaluate(_model(x.shape, w, b, dtype, **attrs), {"x": xd})["y"]
    ref = ReferenceEvaluator(_model(x.shape, w.astype(dtype), None if b is None else
                                    b.astype(dtype), np.float64, **attrs))
    want = ref.run(None, {"x": xd.astype(np.float64)})[0].astype(dtype)
    c = compare(want, got)
    assert c.ok, (attrs, c.reason)
    return got


CASES = [(nd, kw) for nd in (1, 2, 3) for kw in (
    {}, {"group": 2}, {"group": 3, "depthwise": True}, {"batch": 2}, {"bias": False},
    {"auto_pad": "SAME_UPPER"}, {"auto_pad": "SAME_LOWER"}, {"auto_pad": "VALID"},
    {"strides": False, "dilations": False})]


@pytest.mark.parametrize("nd,kw", CASES)
@pytest.mark.parametrize("seed", range(3))
def test_conv_matches_onnx_reference(nd, kw, seed):
    rng = np.random.default_rng([CASES.index((nd, kw)), seed])
    _check(*_case(rng, nd, **kw))


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_conv_other_float_types(dtype, rng):
    x, w, b, attrs = _case(rng, 2, group=2)
    got = _check(x, w, b, attrs, dtype)
    assert got.dtype == dtype


def test_conv_bfloat16_rounds_once_from_float64(rng):
    bf16 = np.dtype(ml_dtypes.bfloat16)
    x, w, b, attrs = _case(rng, 2)
    xb, wb, bb = (a.astype(bf16) for a in (x, w, b))
    got = evaluate(_model(x.shape, wb, bb, bf16, **attrs), {"x": xb})["y"]
    ref = ReferenceEvaluator(_model(x.shape, wb.astype(np.float64), bb.astype(np.float64),
                                    np.float64, **attrs))
    want = ref.run(None, {"x": xb.astype(np.float64)})[0].astype(bf16)
    assert got.dtype == bf16
    assert compare(want, got).ok


def test_large_input_goes_through_several_column_blocks(rng):
    from opshift.evaluator.ops import windows

    # 40 channels * 9 * 160 columns per output row: several rows per block, several blocks
    x = rng.standard_normal((1, 40, 160, 160))
    w = rng.standard_normal((8, 40, 3, 3))
    assert 40 * 9 * 160 * 2 < windows._COLS_CHUNK < 40 * 9 * 160 * 160
    _check(x, w, rng.standard_normal(8), {"pads": [1, 1, 1, 1]})


def test_float32_accumulation_would_fail_the_policy(rng):
    """Why the evaluator sums in float64: the same products summed in float32 land many
    ulps from the exact result where they nearly cancel."""
    x, w, b, attrs = _case(rng, 2, bias=False, strides=False, dilations=False)
    ref = ReferenceEvaluator(_model(x.shape, w.astype(np.float32), None, np.float32, **attrs))
    f32 = ref.run(None, {"x": x.astype(np.float32)})[0]
    exact = ReferenceEvaluator(_model(x.shape, w.astype(np.float32), None, np.float64,
                                      **attrs)).run(None, {"x": x.astype(np.float32)
                                                           .astype(np.float64)})[0]
    assert not compare(exact.astype(np.float32), f32).ok
    _check(x, w, None, attrs)


def test_special_values_propagate(rng):
    x = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    x[0, 0, 2, 2] = np.nan
    x[0, 1, 4, 4] = np.inf
    w = np.abs(rng.standard_normal((3, 2, 3, 3))).astype(np.float32)
    y = evaluate(_model(x.shape, w, None, np.float32, pads=[1, 1, 1, 1]), {"x": x})["y"]
    assert np.isnan(y[0, :, 1:4, 1:4]).all()  # every window that sees the NaN
    assert np.isposinf(y[0, :, 4, 4]).all()
    assert np.isfinite(y[0, :, 0, 0]).all()
    big = np.full((1, 1, 2, 2), np.finfo(np.float32).max, np.float32)
    ones = np.ones((1, 1, 2, 2), np.float32)
    y = evaluate(_model(big.shape, ones, None, np.float32), {"x": big})["y"]
    assert np.isposinf(y).all()  # the float64 sum overflows only when rounded to float32


def test_bad_pads_and_groups_are_named():
    x = np.zeros((1, 4, 5, 5), np.float32)
    w = np.zeros((2, 4, 3, 3), np.float32)
    where = r"node 'conv' \(Conv-22, graph 'g'\): "
    with pytest.raises(EvaluationError, match=where + "pads .* negative"):
        evaluate(_model(x.shape, w, None, np.float32, pads=[-1, 0, 0, 0]), {"x": x})
    with pytest.raises(EvaluationError, match=where + ".*group=3"):
        evaluate(_model(x.shape, w, None, np.float32, group=3), {"x": x})


def test_output_shape_and_layout(rng):
    x, w, b, attrs = _case(rng, 2, batch=3, group=2)
    y = _check(x, w, b, attrs)
    assert y.flags.c_contiguous and y.shape[:2] == (3, w.shape[0])
    assert math.prod(y.shape) == y.size


def _blas_threads() -> list[int]:
    """The thread count of each BLAS library threadpoolctl finds in this process."""
    import threadpoolctl

    return [i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]


def test_large_products_run_on_one_blas_thread(monkeypatch, rng):
    """A product large enough for BLAS to thread runs on one thread, and the thread count
    is restored after; a Conv of that size asks for it, a small one does not."""
    from opshift.evaluator import parallel

    before = _blas_threads()
    if not before:
        pytest.skip("threadpoolctl finds no BLAS library in this process")
    with parallel.one_blas_thread(parallel.BLAS_THREADED_WORK):
        assert _blas_threads() == before  # small products: nothing changed
    with parallel.one_blas_thread(parallel.BLAS_THREADED_WORK + 1):
        assert _blas_threads() == [1] * len(before)
    assert _blas_threads() == before

    asked = []
    real = parallel.one_blas_thread

    def spy(work):
        asked.append(work)
        return real(work)

    monkeypatch.setattr(parallel, "one_blas_thread", spy)
    _check(rng.standard_normal((1, 32, 64, 64)), rng.standard_normal((32, 32, 3, 3)),
           rng.standard_normal(32), {"pads": [1, 1, 1, 1]})
    _check(rng.standard_normal((1, 2, 4, 4)), rng.standard_normal((2, 2, 3, 3)), None, {})
    assert asked[0] == 32 * 32 * 9 * 64 * 64 > parallel.BLAS_THREADED_WORK
    assert asked[1] <= parallel.BLAS_THREADED_WORK


class _Seen(list):
    """One set of thread ids per Conv; a block waits (up to 5 s) until ``expect`` threads
    have taken one, so that a loaded machine starting threads late cannot hide them."""

    expect = 1


def _threads_seen(monkeypatch, cores: int) -> _Seen:
    """With ``cores`` CPUs, the threads that run Conv's matrix products, added to the last
    set of the list returned."""
    import threading
    import time

    from opshift.evaluator import parallel
    from opshift.evaluator.ops import windows

    monkeypatch.setattr(parallel, "cores", lambda: cores)
    seen = _Seen()
    real = np.matmul

    class Spy:
        def matmul(self, *a, **k):
            seen[-1].add(threading.get_ident())
            deadline = time.monotonic() + 5
            while len(seen[-1]) < seen.expect and time.monotonic() < deadline:
                time.sleep(0.001)
            return real(*a, **k)

        def __getattr__(self, name):
            return getattr(np, name)

    monkeypatch.setattr(windows, "np", Spy())
    return seen


@pytest.mark.parametrize("batch", [1, 3])
def test_large_conv_is_shared_by_one_thread_per_core(monkeypatch, rng, batch):
    """A Conv above PARALLEL_WORK runs its column blocks in one thread per core (each block
    once: the result matches the reference), a small one in the caller's thread only."""
    import threading

    from opshift.evaluator import parallel

    seen = _threads_seen(monkeypatch, 3)
    x = rng.standard_normal((batch, 16, 64, 64))
    w = rng.standard_normal((24, 16, 3, 3))
    assert batch * 24 * 16 * 9 * 64 * 64 > parallel.PARALLEL_WORK
    seen.append(set())
    seen.expect = 3
    _check(x, w, rng.standard_normal(24), {"pads": [1, 1, 1, 1]})
    assert len(seen[-1]) == 3
    seen.append(set())
    seen.expect = 1
    _check(rng.standard_normal((1, 4, 9, 9)), rng.standard_normal((4, 4, 3, 3)), None, {})
    assert seen[-1] == {threading.get_ident()}


def test_large_conv_transpose_is_shared_by_one_thread_per_core(monkeypatch, rng):
    from opshift.evaluator import parallel

    seen = _threads_seen(monkeypatch, 2)
    x = rng.standard_normal((1, 32, 48, 48)).astype(np.float32)
    w = rng.standard_normal((32, 16, 4, 4)).astype(np.float32)
    assert parallel.PARALLEL_WORK < 16 * 16 * 32 * 48 * 48
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2],
                            pads=[1, 1, 1, 1])
    m = make_model([node], [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 48, 48])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], opset=17,
                   initializers=[numpy_helper.from_array(w, "w")])
    seen.append(set())
    seen.expect = 2
    y = evaluate(m, {"x": x})["y"]
    assert len(seen[-1]) == 2 and y.shape == (1, 16, 96, 96)


def test_one_core_runs_in_the_callers_thread(monkeypatch, rng):
    import threading

    seen = _threads_seen(monkeypatch, 1)
    seen.append(set())
    _check(rng.standard_normal((1, 16, 64, 64)), rng.standard_normal((24, 16, 3, 3)),
           None, {"pads": [1, 1, 1, 1], "strides": [2, 1]})
    assert seen[-1] == {threading.get_ident()}


def test_blocks_in_parallel_run_once_and_errors_reach_the_caller(monkeypatch):
    import threading

    from opshift.evaluator import parallel

    monkeypatch.setattr(parallel, "cores", lambda: 4)
    done: list[tuple[int, int]] = []

    def run(todo):
        for b in todo:
            done.append((b, threading.get_ident()))

    parallel.in_parallel(list(range(100)), run, parallel.PARALLEL_WORK + 1)
    assert sorted(b for b, _ in done) == list(range(100))
    done.clear()
    parallel.in_parallel(list(range(100)), run, parallel.PARALLEL_WORK)
    assert {t for _, t in done} == {threading.get_ident()} and len(done) == 100

    before = threading.active_count()

    def fail(todo):
        for b in todo:
            if b == 7:
                raise ValueError("block 7")

    with pytest.raises(ValueError, match="block 7"):
        parallel.in_parallel(list(range(50)), fail, parallel.PARALLEL_WORK + 1)
    assert threading.active_count() == before  # every thread joined


def test_blocks_in_parallel_keep_the_callers_floating_point_error_state(monkeypatch):
    """evaluate() ignores floating-point errors (inf and NaN flow as ONNX says); its worker
    threads too, though a new thread starts with numpy's default state (warn)."""
    import threading
    import time
    import warnings

    from opshift.evaluator import parallel

    monkeypatch.setattr(parallel, "cores", lambda: 3)
    seen = []

    def run(todo):
        for _ in todo:
            seen.append((threading.get_ident(), np.geterr()["invalid"]))
            np.array([np.inf]) * 0
            time.sleep(0.002)  # (so that every thread takes blocks)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with np.errstate(all="ignore"):
            parallel.in_parallel(list(range(30)), run, parallel.PARALLEL_WORK + 1)
    assert {state for _, state in seen} == {"ignore"}
    assert len({t for t, _ in seen}) > 1


def test_one_blas_thread_in_several_threads_restores_the_count():
    """Blocks in several threads at once (a process evaluating in a thread pool) leave the
    BLAS thread count as it was, and each block runs on one BLAS thread."""
    import threading

    from opshift.evaluator import parallel

    before = _blas_threads()
    if not before:
        pytest.skip("threadpoolctl finds no BLAS library in this process")
    a = np.ones((200, 200))
    seen = []

    def work():
        for _ in range(20):
            with parallel.one_blas_thread(parallel.BLAS_THREADED_WORK + 1):
                seen.append(_blas_threads())
                a @ a

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(seen) == 60 and all(s == [1] * len(before) for s in seen)
    assert _blas_threads() == before
