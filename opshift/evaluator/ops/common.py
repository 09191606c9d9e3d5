"""Helpers shared by op modules: legacy broadcasting, dtype kinds, attribute lists."""

from __future__ import annotations

import contextlib
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ml_dtypes
import numpy as np

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
#: float16 and bfloat16: computed in float32, rounded once to their type.
NARROW_FLOATS = frozenset({np.dtype(np.float16), BFLOAT16})


def is_float(x: np.ndarray) -> bool:
    """float16/32/64 or bfloat16 (ml_dtypes' bfloat16 has kind 'V')."""
    return x.dtype.kind == "f" or x.dtype == BFLOAT16


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype to accumulate in: float32 for float16/bfloat16, else the dtype itself."""
    if dtype in NARROW_FLOATS:
        return np.dtype(np.float32)
    return dtype


def sum_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype sums of products or of many terms run in: float64 for every float type,
    rounded once to the type after (within an ulp of the exact sum but for the rare sum
    that lies that close to a rounding boundary, whatever order numpy or BLAS adds in);
    integers in their own type (they wrap, as ONNX's do)."""
    if dtype.kind == "f" or dtype == BFLOAT16:
        return np.dtype(np.float64)
    return dtype


def legacy_rhs(ctx, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """B placed for A by the opset 1..6 ``broadcast``/``axis`` attributes of binary ops.

    broadcast=0: shapes must be equal. broadcast=1: B is a scalar (size 1) or its shape is a
    contiguous run of A's shape starting at ``axis`` (suffix matching if ``axis`` is absent).
    """
    if not ctx.attrs.get("broadcast", 0):
        if a.shape != b.shape:
            raise ctx.error(f"shapes {list(a.shape)} and {list(b.shape)} differ and "
                            "broadcast=0 (opsets <= 6 need broadcast=1 to broadcast)")
        return b
    if b.size == 1:
        return b.reshape(())
    axis = ctx.attrs.get("axis")
    if axis is None:
        axis = a.ndim - b.ndim
    elif axis < 0:
        axis += a.ndim
    if axis < 0 or axis + b.ndim > a.ndim or a.shape[axis:axis + b.ndim] != b.shape:
        raise ctx.error(f"B of shape {list(b.shape)} is not a contiguous part of A's shape "
                        f"{list(a.shape)} at axis {ctx.attrs.get('axis', 'suffix')}")
    return b.reshape(b.shape + (1,) * (a.ndim - axis - b.ndim))


def normalize_axes(axes: Sequence[int], rank: int, ctx=None) -> list[int]:
    out = []
    for a in axes:
        a = int(a)
        if not -rank <= a < rank:
            msg = f"axis {a} is out of range for rank {rank}"
            raise ctx.error(msg) if ctx is not None else ValueError(msg)
        out.append(a + rank if a < 0 else a)
    return out


#: the most elements a node may make from its input values (a shape, a size, repeats,
#: pads): generated inputs hold 2**31 and the like, which would take the machine's memory
MAX_MADE_ELEMENTS = 1 << 28


def made(ctx, shape: Sequence[int]) -> tuple[int, ...]:
    """``shape``, the output shape a node computes from its input values; a
    :class:`~opshift.errors.LimitError` past :data:`MAX_MADE_ELEMENTS`."""
    from opshift.errors import LimitError

    shape = tuple(int(d) for d in shape)
    n = math.prod(max(d, 0) for d in shape)
    if n > MAX_MADE_ELEMENTS:
        raise LimitError(f"{ctx.where()}: an output of {n} elements ({list(shape)}), over the "
                         f"evaluator's limit of {MAX_MADE_ELEMENTS} for a shape made from "
                         "input values")
    return shape


def ints(v) -> list[int]:
    """An int64 tensor input (or attribute list) as a list of Python ints."""
    return [int(i) for i in np.asarray(v).reshape(-1)]


#: Multiply-adds above which OpenBLAS splits one matrix product across its threads
#: (4 x 65536, its GEMM_MULTITHREAD_THRESHOLD); smaller products run on one thread anyway.
BLAS_THREADED_WORK = 4 * 65536
_blas: Any = None
#: Held while BLAS is limited: the limit is process-wide, so overlapping blocks in several
#: threads would each save the others' limit and the last to leave could restore the wrong one
_blas_lock = threading.RLock()


@contextlib.contextmanager
def one_blas_thread(work: int) -> Iterator[None]:
    """A block in which BLAS runs on one thread, for products of up to ``work`` multiply-adds
    each (a no-op below :data:`BLAS_THREADED_WORK`).

    A BLAS thread that loses its core to another process stalls every product it shares,
    and its partner spins waiting: on a 2-core machine with one other busy process, a CNN of
    8 Convs took 10x longer with OpenBLAS's two threads than with one. One thread costs
    little even when both cores are free (the evaluator's products are one image's).
    The limit is set and restored through threadpoolctl, for the BLAS numpy is linked to;
    such blocks in several threads run one at a time.
    """
    global _blas
    if work <= BLAS_THREADED_WORK:
        yield
        return
    with _blas_lock:
        if _blas is None:
            from threadpoolctl import ThreadpoolController

            _blas = ThreadpoolController()  # the native libraries loaded, found once
        with _blas.limit(limits=1, user_api="blas"):
            yield


#: Multiply-adds below which a product is not worth a second thread (starting and joining
#: one costs about what 2.5 x 10^6 float64 multiply-adds do, ~85 us).
PARALLEL_WORK = 1 << 23


def cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def threads_for(work: int) -> int:
    """Threads worth sharing ``work`` multiply-adds: one below :data:`PARALLEL_WORK`, else
    one per core."""
    return cores() if work > PARALLEL_WORK else 1


#: Blocks per thread at least, when several share a product: one whose core another
#: process takes holds up the rest by one small block at most.
BLOCKS_PER_THREAD = 4


def block_size(units: int, work: int, largest: int) -> int:
    """How many of ``units`` one block takes: at most ``largest``, and few enough for
    :data:`BLOCKS_PER_THREAD` blocks per thread when threads share ``work``."""
    threads = threads_for(work)
    if threads > 1:
        largest = min(largest, -(-units // (BLOCKS_PER_THREAD * threads)))
    return max(1, largest)


def in_parallel(blocks: Sequence, run: Callable[[Iterator], None], work: int) -> None:
    """``run(blocks)`` in up to :func:`threads_for` ``(work)`` threads at once, each taking the
    next block from one shared iterator until none is left (a thread that loses its core to
    another process takes fewer blocks; none waits on another's block).

    ``work`` is the multiply-adds of all blocks. BLAS runs on one thread in each
    (:func:`one_blas_thread`): numpy releases the GIL for its copies and products, so the
    threads share the work without OpenBLAS's own threads, which spin while waiting for one
    another and stall when another process takes a core.
    """
    n = min(threads_for(work), len(blocks))
    shared = iter(blocks)  # a list's or range's next() is atomic: no block is taken twice
    with one_blas_thread(work):
        if n <= 1:
            run(shared)
            return
        failed: list[BaseException] = []
        errors = np.geterr()  # a new thread starts with numpy's default error state

        def worker() -> None:
            try:
                with np.errstate(**errors):
                    run(shared)
            except BaseException as e:  # re-raised in the caller's thread
                failed.append(e)

        others = [threading.Thread(target=worker, daemon=True) for _ in range(n - 1)]
        for t in others:
            t.start()
        try:
            worker()
        finally:
            # blocks nobody took are dropped (after an error or an interrupt in the caller),
            # so every thread stops after its current block
            for _ in shared:
                pass
            for t in others:
                t.join()
        if failed:
            raise failed[0]


def requantized(r: np.ndarray, zero_point, dtype: np.dtype) -> np.ndarray:
    """``r`` (float64) shifted by ``zero_point`` (float64, shaped to broadcast; None: no
    shift), rounded half to even and clipped to the integer ``dtype``, as onnx.reference's
    Q-linear kernels compute it."""
    if zero_point is not None:
        r += zero_point
    info = np.iinfo(dtype)
    return np.clip(np.rint(r), info.min, info.max).astype(dtype)
