"""What every bench script shares: whole commands run as child processes, timed from process
start to exit, with the child's peak RSS, best of N, interleaved with the floors of the
same run, and printed as ratios.

* ``run(job)``: one child. Wall time is from just before the fork to ``os.wait4``'s return;
  peak RSS is that child's ``ru_maxrss`` (KiB on Linux).
* ``measure(jobs, repeat)``: rounds that run every job once (after one untimed warm-up
  round, which also writes bytecode caches and fills the page cache), so that a busy spell
  of a shared machine hits the command and its floor alike; each job keeps its fastest run
  and its smallest peak RSS.

The parent must stay small. Linux counts in a child's ``ru_maxrss`` the memory of the
process it was forked from (``exec`` records the old address space's high-water mark, and
Python's subprocess forks with vfork, sharing the parent's), so a parent that had loaded a
100 MB model would make every child look at least 100 MB big. The scripts therefore import
only the standard library; models are built and read by ``bench/models.py`` in children,
and ``check_parent_rss`` says when the parent's own peak could hide a child's.

Every script takes ``--opshift-path DIR`` (the tree whose ``opshift`` the children import,
through PYTHONPATH; default this repository) and ``--compare DIR`` (a second tree, run in
the same rounds, each command row printed for both). Children run with
``OPSHIFT_CACHE_DIR=off`` (no on-disk caches a tree may keep; ``--cache`` keeps the
environment's) and with bytecode caches, as an installed package runs.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
WORK = BENCH / "_work"
PY = sys.executable

#: whole-process floors: the same interpreter running onnx (or onnx_ir) alone
ONNX_LOAD_SAVE = "import onnx, sys; onnx.save(onnx.load(sys.argv[1]), sys.argv[2])"
ONNX_LOAD = "import onnx, sys; onnx.load(sys.argv[1])"
#: load, one Python pass reading what any command must read of every node, value_info entry
#: and initializer, then save: what bounds a tool that reads the graph once in Python
ONNX_LOAD_READ_SAVE = (
    "import onnx, sys; m = onnx.load(sys.argv[1]); g = m.graph\n"
    "for n in g.node: n.op_type, n.domain, list(n.input), list(n.output), "
    "[a.name for a in n.attribute]\n"
    "for v in g.value_info:\n"
    "    t = v.type.tensor_type; t.elem_type, [d.dim_value for d in t.shape.dim]\n"
    "for t in g.initializer: t.name, t.data_type, list(t.dims)\n"
    "onnx.save(m, sys.argv[2])")
ONNX_IR_LOAD_SAVE = "import onnx_ir, sys; onnx_ir.save(onnx_ir.load(sys.argv[1]), sys.argv[2])"


@dataclasses.dataclass
class Limits:
    """``timeout``: a run is killed after this many seconds (an error); ``long``: a job
    whose run takes longer is not run again (see ``measure``)."""

    timeout: float = 1800.0
    long: float = 60.0


LIMITS = Limits()


@dataclasses.dataclass
class Job:
    """One command line to time. ``output`` is removed before every run (each run writes a
    new file, as a command usually does; a folder is emptied); ``env`` is added to the
    parent's environment."""

    name: str
    cmd: list[str]
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    output: Path | None = None
    stdout: bool = False  # keep the child's stdout (default: /dev/null)
    #: write out the page cache's dirty data before each run, untimed: a job that writes GBs
    #: leaves its writeback to whichever job runs next
    settle: bool = False


@dataclasses.dataclass
class Result:
    """The best of a job's runs: wall seconds, peak RSS KiB; or the error of a failed run."""

    wall: float = float("inf")
    rss_kib: int = 0
    runs: int = 0
    error: str | None = None
    stdout: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None and self.runs > 0

    @property
    def rss_mib(self) -> float:
        return self.rss_kib / 1024


def run(job: Job) -> tuple[float, int, int, str, str]:
    """Run ``job`` once: (wall seconds, peak RSS KiB, exit code, stderr tail, stdout), in
    bench/_work/ (``python -c`` and ``-m`` put the working folder first on sys.path: the
    repository's would shadow ``--opshift-path``)."""
    if job.output is not None:
        _remove(job.output)
    if job.settle:
        os.sync()
    WORK.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, **job.env}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    with tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        p = subprocess.Popen(job.cmd, env=env, cwd=WORK, stdin=subprocess.DEVNULL,
                             stdout=out if job.stdout else subprocess.DEVNULL, stderr=err)
        killer = threading.Timer(LIMITS.timeout, os.kill, (p.pid, signal.SIGKILL))
        killer.start()
        try:  # wait without reaping: the pid cannot be reused before the timer is off
            os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
        finally:
            killer.cancel()
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t0
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        tail = err.read()[-2000:].decode(errors="replace").strip()
        if p.returncode == -signal.SIGKILL and wall >= LIMITS.timeout:
            tail = f"timed out: killed after {LIMITS.timeout:g} s"
        out.seek(0)
        stdout = out.read().decode(errors="replace") if job.stdout else ""
    return wall, usage.ru_maxrss, p.returncode, tail, stdout


def _remove(path: Path) -> None:
    """Remove the file ``path``; a folder is emptied and kept."""
    if path.is_dir() and not path.is_symlink():
        for entry in path.iterdir():
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
    elif path.exists() or path.is_symlink():
        path.unlink()


def measure(jobs: list[Job], repeat: int, warmup: int = 1) -> dict[str, Result]:
    """Each job's best of ``repeat`` runs, in rounds that run every job once, after
    ``warmup`` untimed rounds. A job that fails is not run again; nor is one whose run took
    over ``LIMITS.long`` seconds (a warm-up that slow counts as its timed run: warming
    cannot matter to it, and a shared machine cannot spare the repeats)."""
    results = {j.name: Result() for j in jobs}
    done: set[str] = set()
    for round_ in range(warmup + repeat):
        for job in jobs:
            res = results[job.name]
            if res.error is not None or job.name in done:
                continue
            wall, rss, rc, tail, out = run(job)
            # (4: a --verify that ran in full but left something unchecked, e.g. the outputs of
            # a synthetic chain thousands of layers deep, infinite everywhere: timed all the same)
            if rc not in (0, 4):
                last = tail.splitlines()[-1] if tail else ""
                res.error = f"exit {rc}: {last}"[:300]
                continue
            if wall > LIMITS.long:
                done.add(job.name)
            elif round_ < warmup:
                continue
            res.runs += 1
            if wall < res.wall:
                res.wall, res.stdout = wall, out
            res.rss_kib = rss if res.rss_kib == 0 else min(res.rss_kib, rss)
    return results


def check_parent_rss(results: dict[str, Result]) -> None:
    """Warn when the parent's own peak RSS reaches a child's: that child's figure may be
    the parent's (see the module docstring)."""
    mine = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    low = [n for n, r in results.items() if r.ok and r.rss_kib <= mine * 1.05]
    if low:
        print(f"  warning: this process peaked at {mine / 1024:.0f} MiB, and the peak RSS of "
              f"{', '.join(low)} is not above it: those figures may be this process's")


# -- trees -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Tree:
    """An opshift source tree the children import."""

    label: str
    path: Path
    env: tuple[tuple[str, str], ...]

    def opshift(self, *args: object) -> list[str]:
        """``python -m opshift ARGS``."""
        return [PY, "-m", "opshift", *map(str, args)]


def add_tree_options(ap: argparse.ArgumentParser) -> None:
    """``--opshift-path``, ``--compare``, ``--cache``, ``--repeat`` (default 3),
    ``--timeout``, ``--long``."""
    ap.add_argument("--opshift-path", default=str(REPO), metavar="DIR",
                    help="tree whose opshift the children import (default: this repository)")
    ap.add_argument("--compare", metavar="DIR",
                    help="a second tree, timed in the same rounds")
    ap.add_argument("--cache", action="store_true",
                    help="keep OPSHIFT_CACHE_DIR from the environment (default: off)")
    ap.add_argument("--repeat", type=int, default=3, help="timed runs per job (best kept)")
    ap.add_argument("--timeout", type=float, default=LIMITS.timeout,
                    help="kill a run after this many seconds (default %(default)g)")
    ap.add_argument("--long", type=float, default=LIMITS.long,
                    help="run a job once when a run takes longer (default %(default)g s)")


def trees(args: argparse.Namespace) -> list[Tree]:
    """The trees of ``--opshift-path`` and ``--compare``, each checked to be what its
    children import; sets ``LIMITS`` from ``--timeout`` and ``--long``."""
    LIMITS.timeout, LIMITS.long = args.timeout, args.long
    paths = [Path(args.opshift_path).resolve()]
    if args.compare:
        paths.append(Path(args.compare).resolve())
    labels = [p.name for p in paths]
    if len(set(labels)) < len(labels):
        labels = [f"{p.parent.name}/{p.name}" for p in paths]
    out = []
    for label, path in zip(labels, paths):
        env = {"PYTHONPATH": str(path)}
        if not args.cache:
            env["OPSHIFT_CACHE_DIR"] = "off"
        tree = Tree(label, path, tuple(env.items()))
        probe = Job("probe", [PY, "-c", "import opshift; print(opshift.__file__)"],
                    env=env, stdout=True)
        _, _, rc, tail, stdout = run(probe)
        got = Path(stdout.strip()).resolve() if rc == 0 else None
        if got is None or path not in got.parents:
            raise SystemExit(f"{path}: its children import opshift from {got or tail}")
        out.append(tree)
    return out


# -- models ------------------------------------------------------------------------------


def model(spec: dict) -> Path:
    """The file of a ``models.Spec`` (as a dict), built by a child on first use under
    bench/_work/<hash of models.py>/ (the folder changes when the generator does)."""
    key = hashlib.sha256((BENCH / "models.py").read_bytes()).hexdigest()[:10]
    folder = WORK / key
    folder.mkdir(parents=True, exist_ok=True)
    spec_json = json.dumps(spec, sort_keys=True)
    name = hashlib.sha256(spec_json.encode()).hexdigest()[:16] + ".onnx"
    path = folder / name
    if not path.exists():
        t0 = time.perf_counter()
        subprocess.run([PY, str(BENCH / "models.py"), "build", spec_json, str(path)],
                       check=True)
        print(f"  (built {spec_json} in {time.perf_counter() - t0:.1f} s)", flush=True)
    return path


def describe(path: Path) -> dict:
    """``models.describe`` of a file, read by a child."""
    p = subprocess.run([PY, str(BENCH / "models.py"), "describe", str(path)],
                       capture_output=True, text=True, check=True)
    return json.loads(p.stdout)


def scratch() -> Path:
    """A folder for outputs, under bench/_work/ (removed by the caller)."""
    WORK.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="out-", dir=WORK))


# -- formatting --------------------------------------------------------------------------


def parse_sizes(text: str) -> list[int]:
    """``"10k,100k,1M"`` -> ``[10000, 100000, 1000000]``."""
    out = []
    for part in text.split(","):
        part = part.strip().lower()
        mult = {"k": 1000, "m": 1_000_000}.get(part[-1:], 1)
        out.append(int(float(part.rstrip("km")) * mult))
    return out


def size_label(n: int) -> str:
    if n >= 1_000_000 and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def cell(r: Result) -> str:
    """``1234 ms  56 MiB`` or the error."""
    if not r.ok:
        return f"ERROR {r.error}"
    return f"{r.wall * 1000:7.0f} ms {r.rss_mib:5.0f} MiB"


def ratio(a: Result, b: Result, attr: str = "wall") -> float | None:
    if not (a.ok and b.ok):
        return None
    return getattr(a, attr) / getattr(b, attr)


def verdict(value: float | None, target: float) -> str:
    if value is None:
        return "  -  "
    return f"{value:5.2f}x" + ("" if value <= target else " !")


def header(title: str) -> None:
    load = os.getloadavg()
    print(f"\n== {title}   (load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}, "
          f"{os.cpu_count()} CPUs)", flush=True)
