"""Memory while opshift works: Python's cyclic garbage collector paused while a command, or a
rewrite called as a library function, builds objects it keeps until it is done; a command's
address space bounded by the memory there is."""

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


@contextlib.contextmanager
def bounded_address_space(share: int = 1) -> Iterator[None]:
    """Let the process (and the workers it starts) reserve at most the machine's memory and swap,
    or its cgroup's memory, divided by ``share`` (``-j N``: N workers share it), for the block.
    Past that an allocation fails with MemoryError, which a command reports in one line (exit
    2), instead of the kernel's out-of-memory killer ending the process: a Range of a generated
    size, an Add broadcasting [65536, 1] with [1, 65536]. A lower limit already set is kept;
    nothing is done where the platform has no such limit."""
    try:
        import resource
    except ImportError:  # (not POSIX)
        yield
        return
    total = _memory_total()
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = total // max(share, 1) if total else None
    if limit is not None and hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if limit is None or (soft != resource.RLIM_INFINITY and soft <= limit):
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _memory_total() -> int | None:
    """Bytes of memory this process may use: the machine's memory and swap, or its cgroup's
    memory when lower."""
    sizes, machine = [], 0
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith(("MemTotal:", "SwapTotal:")):
                    machine += int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    if machine:
        sizes.append(machine)
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit():
            sizes.append(int(text))
    return min(sizes) if sizes else None
