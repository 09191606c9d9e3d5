"""The evaluator's speed seam: products shared by threads, BLAS held to one thread.

Kernels whose sums are large (Conv, MatMul, Gemm, ConvTranspose, pools, ...) cut them into
blocks and hand them to :func:`in_parallel`; everything about threads, cores and the BLAS
numpy is linked to lives here, so a kernel reads as its arithmetic.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

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
