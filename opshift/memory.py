"""Memory while opshift works: Python's cyclic garbage collector paused while a command, or a
rewrite called as a library function, builds objects it keeps until it is done."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def no_cyclic_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector for the block. A rewrite allocates millions of
    small objects it keeps (an onnx_ir model is made of them, in reference cycles), and each
    collection the allocations trigger walks all the live ones again: on 100k-node models
    that was a third of fuse's time. Nothing is leaked: cycles made meanwhile are collected
    once the collector runs again."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
