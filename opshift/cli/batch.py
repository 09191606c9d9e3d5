"""One model or many: expanding the inputs (files, folders, globs, ``-``), choosing each
output, running the models (``-j N``: in worker processes), printing one result per model
and returning the most severe exit code. A model that fails does not stop the others."""

from __future__ import annotations

import gc
import glob
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from opshift import progress
from opshift.cli import progress_line
from opshift.cli.models import STDIO, same_file
from opshift.cli.output import Outcome, emit
from opshift.errors import OpshiftError
from opshift.memory import bounded_address_space

_GLOB = set("*?[")


@dataclass(frozen=True)
class Job:
    """One model to process: where it is read from and where its result goes."""

    input: str
    output: str | None
    make_parents: bool = False  # create the output's folder (inside -o DIR)
    single: bool = True  # the only model: its result is printed in full


Process = Callable[[object, Job], Outcome]


def jobs(args, *, writes: bool) -> tuple[list[Job], bool]:
    """The jobs of ``args.inputs`` and whether this is a batch (several models, a folder or
    a glob: one line per model)."""
    found: list[tuple[str, Path | None]] = []  # (input, path relative to its folder)
    batch = len(args.inputs) > 1
    for text in args.inputs:
        if text == STDIO:
            if len(args.inputs) > 1:
                raise OpshiftError("'-' (stdin) can only be the one input")
            found.append((text, None))
        elif Path(text).is_dir():
            batch = True
            # not only regular files: a FIFO, a dangling symlink or a folder named x.onnx
            # is named in its own error line rather than skipped without a word
            files = sorted(p for p in Path(text).rglob("*.onnx")
                           if not p.name.startswith("."))
            if not files:
                raise OpshiftError(f"{text}: folder holds no .onnx file")
            found += [(str(p), p.relative_to(text)) for p in files]
        elif not Path(text).exists() and _GLOB & set(text):
            batch = True
            files = sorted(p for p in glob.glob(text, recursive=True) if not Path(p).is_dir())
            if not files:
                raise OpshiftError(f"{text}: no file matches")
            found += [(p, None) for p in files]
        else:
            found.append((text, None))  # a missing file fails on its own, not the batch
    output = getattr(args, "output", None) if writes else None
    if output == STDIO and args.json:
        raise OpshiftError("--json and -o - would both write to stdout; give -o a file")
    if output is None:
        return [Job(i, None, single=not batch) for i, _ in found], batch
    if not batch:
        i = found[0][0]
        # a trailing slash names a folder, made if missing, as for several models
        slash = output != STDIO and output.endswith(("/", os.sep))
        if Path(output).is_dir() or slash:
            if Path(output).exists() and not Path(output).is_dir():
                raise OpshiftError(f"-o {output}: a trailing slash names a folder, and this "
                                   "is a file")
            if i == STDIO:
                raise OpshiftError(f"-o {output}: a folder; a model from stdin needs a file "
                                   "name")
            output = str(Path(output) / Path(i).name)
        _check_not_input(i, output)
        return [Job(i, output, make_parents=slash)], False
    if output == STDIO:
        raise OpshiftError("-o -: several models cannot all go to stdout; give a folder")
    folder = Path(output)
    if folder.exists() and not folder.is_dir():
        raise OpshiftError(f"-o {output}: several models need an output folder, and this is "
                           "a file")
    out: list[Job] = []
    seen: dict[Path, str] = {}
    for i, rel in found:
        dst = folder / (rel if rel is not None else Path(i).name)
        if dst in seen:
            raise OpshiftError(f"{i} and {seen[dst]} would both be written to {dst}")
        seen[dst] = i
        _check_not_input(i, str(dst))
        out.append(Job(i, str(dst), make_parents=True, single=False))
    folder.mkdir(parents=True, exist_ok=True)
    return out, True


def _check_not_input(src: str, dst: str) -> None:
    if same_file(src, dst):
        raise OpshiftError(f"{dst}: output is the input file; write the result elsewhere "
                           "(the input is never modified)")


def run(args, process: Process, *, writes: bool) -> int:
    """Process every model of ``args``; print each result; return the most severe exit code
    (:func:`worst`)."""
    todo, batch = jobs(args, writes=writes)
    bar = progress_line.for_args(args, f"opshift {args.command}")
    try:
        if not batch:
            with bar.phase(Path(todo[0].input).name if todo[0].input != STDIO else "stdin"):
                o = process(args, todo[0])  # errors go to cli.main, as for every command
            bar.close()
            emit(o, args, single=True)
            return o.exit_code
        codes = []
        workers = workers_for(args.jobs, len(todo))
        # the workers share the memory (a parent running no model is small)
        with bounded_address_space(workers), bar.phase("", len(todo), "models"):
            for o in outcomes(args, process, todo, workers):
                bar.advance()
                bar.close_line()
                emit(o, args, single=False)
                codes.append(o.exit_code)
        return worst(codes)
    finally:
        bar.close()


#: exit codes from least to most severe: a check that left something unchecked (4) wrote a
#: model it could not fully vouch for; a refusal (2) says what the input cannot do; a
#: verification mismatch (1), that a rewrite computed something else; 3, an internal error
_SEVERITY = (0, 4, 2, 1, 3)


def worst(codes: list[int]) -> int:
    """The most severe of ``codes`` (one per model): a mismatch is not hidden by a refusal."""
    return max(codes, key=lambda c: (_SEVERITY.index(c) if c in _SEVERITY else len(_SEVERITY),
                                     c), default=0)


def workers_for(jobs: int, models: int) -> int:
    """How many worker processes ``-j jobs`` starts for ``models`` models: no more than there
    are models, or cores to run them on (more would only share the cores and the memory)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # (not Linux)
        cores = os.cpu_count() or 1
    return max(1, min(jobs, models, cores))


def outcomes(args, process: Process, todo: list[Job], workers: int | None = None):
    """Each job's outcome, in order, run by ``workers`` processes (default ``args.jobs``).
    With several, a worker that dies (the out-of-memory killer, a signal) breaks the pool: the
    first unfinished job is then run alone in a new one, failed if it kills that too, and the
    rest go on in a new pool."""
    workers = args.jobs if workers is None else workers
    if workers <= 1 or len(todo) == 1:
        for job in todo:
            yield _one(process, args, job)
        return
    from concurrent.futures.process import BrokenProcessPool

    rest = todo
    while rest:
        done = 0
        try:
            with _pool(min(workers, len(rest))) as pool:
                futures = [pool.submit(_one, process, args, job) for job in rest]
                for f in futures:
                    yield f.result()
                    done += 1
        except BrokenProcessPool:
            job = rest[done]
            try:
                with _pool(1) as pool:
                    o = pool.submit(_one, process, args, job).result()
            except BrokenProcessPool:
                o = Outcome(args.command, job.input).fail(OpshiftError(
                    f"{job.input}: the worker process died (killed by the system: out of "
                    "memory?)"), 2, job.input)
            yield o
            done += 1
        rest = rest[done:]


def _pool(workers: int):
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, initializer=progress.disable)


def _one(process: Process, args, job: Job) -> Outcome:
    """``process`` one model; an error becomes that model's outcome, not the batch's end.
    The cycles it leaves are freed before the next model (the cyclic collector is paused
    while a command runs: see :func:`opshift.cli.main`)."""
    try:
        return process(args, job)
    except OpshiftError as e:
        return Outcome(args.command, job.input).fail(e, e.exit_code, job.input)
    except MemoryError:
        return Outcome(args.command, job.input).fail(
            OpshiftError(f"{job.input}: out of memory"), 2, job.input)
    except Exception as e:  # one model's bug must not lose the other models' results
        if args.verbose:
            import traceback

            traceback.print_exc(file=sys.stderr)
        msg = (f"{job.input}: internal error: {type(e).__name__}: {e} (run with -v for the "
               "traceback)")
        return Outcome(args.command, job.input).fail(RuntimeError(msg), 3, job.input)
    finally:
        gc.collect()
