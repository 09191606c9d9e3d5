"""The ``opshift`` command line: parse, call the library, print.

Each subcommand is a module of this package with ``register(subparsers)``, which adds its
parser and sets ``func(args) -> int``; :mod:`.batch`, :mod:`.rewrite`, :mod:`.models`,
:mod:`.options`, :mod:`.checks` and :mod:`.output` are what the commands share.

Exit codes: 0 ok, 1 verification mismatch, 2 bad input or impossible request, 3 internal
error (a bug in opshift: one line, the traceback with -v), 130 interrupted (SIGINT), 143
and 129 stopped by SIGTERM and SIGHUP (:func:`exit_on_signals`), 141 (128 + SIGPIPE) when
stdout is closed early (``opshift ops | head -1``: no message).
"""

from __future__ import annotations

import argparse
import functools
import importlib
import os
import re
import shutil
import sys
import traceback
from collections.abc import Sequence

from opshift.cli.options import HOISTED, add_common_options
from opshift.errors import OpshiftError, printable
from opshift.memory import bounded_address_space, no_cyclic_gc

COMMANDS = ("convert", "inline", "fuse", "fix", "inspect", "verify", "ops")

EPILOG = """\
which command when:
  inspect   what a model holds: op counts, its PRelu/LeakyRelu/Selu, defects (--opset N:
            what convert would do)
  fix       a model runtimes refuse (stale attributes, 1-D slopes, duplicate names, IR)
  convert   a runtime or tool that wants another opset
  inline    a runtime without PRelu/LeakyRelu/Selu (or model-local functions)
  fuse      an exported model with those activations spelled out in primitive ops
  verify    two models that should compute the same thing

examples:
  opshift convert model.onnx --opset 9 -o model9.onnx --verify
  opshift -q convert models/ --opset 13 -o out/ -j 2
  opshift verify model.onnx model9.onnx --ulp 0
  opshift inspect model.onnx

-v, -q, --json, -j and --input-shape may come before or after the command. With --json,
every command prints one JSON object per model, one per line, with the keys command, input,
output, ok, exit_code, changes, ops_before, ops_after, verify, notes, error, details.

exit codes: 0 ok, 1 verification mismatch, 2 bad input or impossible conversion, 3 internal
error, 4 a check left something unchecked (see --allow-incomplete); with several models, the
worst of them (3, 1, 2, 4)
"""


class Parser(argparse.ArgumentParser):
    """argparse's parser without abbreviations: ``--ops 9`` must not mean ``--opset 9``."""

    def __init__(self, *args, allow_abbrev: bool = False, **kwargs):
        super().__init__(*args, allow_abbrev=allow_abbrev, **kwargs)


def version_text() -> str:
    """``opshift 0.1.0 (onnx 1.23.2, opsets 1..28, Python 3.11.2)``."""
    import platform

    import onnx

    from opshift import __version__

    return (f"opshift {__version__} (onnx {onnx.__version__}, opsets "
            f"1..{onnx.defs.onnx_opset_version()}, Python {platform.python_version()})")


def hoist(argv: list[str]) -> list[str]:
    """Move the common options given before the command name after it, where the command's
    parser reads them: ``-v convert m.onnx ...`` -> ``convert -v m.onnx ...``."""
    i = 0
    while i < len(argv):
        a = argv[i]
        name = a.split("=", 1)[0]
        if re.fullmatch(r"-[vq]+", a) or (name in HOISTED and not HOISTED[name]) \
                or "=" in a and name in HOISTED or re.fullmatch(r"-j\d+", a):
            i += 1
        elif name in HOISTED:
            i += 2
        else:
            break
    if 0 < i < len(argv) and argv[i] in COMMANDS:
        return [argv[i], *argv[:i], *argv[i + 1:]]
    return argv


def common_parent() -> argparse.ArgumentParser:
    """Options every subcommand accepts, as a parent parser (for :func:`build_parser`)."""
    p = Parser(add_help=False)
    add_common_options(p)
    return p


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (``opshift -h``, and a first argument that is not a
    command)."""
    parser = Parser(
        prog="opshift",
        description="Exact opset conversion, inlining and fusion of PRelu, LeakyRelu and "
                    "Selu in ONNX models, checked by a version-aware NumPy evaluator.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=version_text())
    add_common_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    parent = common_parent()
    for name in COMMANDS:
        mod = _command_module(name)
        if mod is not None:
            mod.register(sub, parent)
    return parser


def command_parser(name: str) -> argparse.ArgumentParser | None:
    """The parser of subcommand ``name`` on its own (prog ``opshift NAME``, the same options,
    help and errors as under :func:`build_parser`), None if there is no such command. A run
    builds only this one: argparse's set-up of the full parser costs about as much again."""
    mod = _command_module(name) if name in COMMANDS else None
    if mod is None:
        return None
    one = _OneCommand()
    mod.register(one, None)
    return one.parser


class _OneCommand:
    """Stands in for the subparsers action in a command's ``register``: the parser it adds
    is a standalone one. It gets the common options added directly rather than copied from
    a parent parser, and a formatter that reads the terminal width once: argparse builds a
    formatter for every option added, and a parent is one more parser to build (together
    about a third of what parsing a command line costs)."""

    parser: argparse.ArgumentParser | None = None

    def add_parser(self, name: str, **kwargs) -> argparse.ArgumentParser:
        kwargs.pop("help", None)  # the line in the command list of ``opshift -h``
        kwargs.pop("aliases", None)
        kwargs.pop("parents", None)
        if kwargs.get("formatter_class") is argparse.RawDescriptionHelpFormatter:
            kwargs["formatter_class"] = _RawDescriptionFormatter
        self.parser = Parser(prog=f"opshift {name}", **kwargs)
        add_common_options(self.parser)
        return self.parser


@functools.cache
def _terminal_width() -> int:
    return shutil.get_terminal_size().columns - 2  # what argparse's HelpFormatter uses


class _RawDescriptionFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's RawDescriptionHelpFormatter, with the terminal width read once."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position,
                         _terminal_width() if width is None else width)


def _command_module(name: str):
    try:
        return importlib.import_module(f"opshift.cli.{name}")
    except ModuleNotFoundError as e:
        if e.name == f"opshift.cli.{name}":
            return None  # not built yet
        raise


def exit_on_signals() -> None:
    """Make SIGTERM (what ``timeout``, CI cancellation and ``docker stop`` send) and SIGHUP
    end a run the way Ctrl-C (SIGINT) does: an exception that unwinds through every clean-up
    (temp files removed, nothing published; see :mod:`opshift.io.output`), then exit status
    128 + the signal's number (SIGINT 130, SIGTERM 143, SIGHUP 129). A signal the process
    was started with ignored (``nohup``, a background job) stays ignored."""
    import signal

    for sig in _signals():
        if signal.getsignal(sig) in (signal.SIG_DFL, signal.default_int_handler):
            signal.signal(sig, _stop)


def _signals() -> list:
    import signal

    return [getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)]


def _stop(signum: int, frame) -> None:
    import signal

    from opshift.io.output import hold

    if hold(signum):  # files are being created or published: acted on right after
        return
    for sig in _signals():  # the clean-up runs once
        if signal.getsignal(sig) is _stop:
            signal.signal(sig, signal.SIG_IGN)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    print(f"opshift: stopped by {signal.Signals(signum).name}", file=sys.stderr)
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line ``argv`` (default: this process's). Without ``argv``, as the
    ``opshift`` program, it also handles the process's signals (:func:`exit_on_signals`)."""
    if argv is None:
        exit_on_signals()
    argv = hoist(list(sys.argv[1:] if argv is None else argv))
    parser = command_parser(argv[0]) if argv else None
    if parser is not None:
        args = parser.parse_args(argv[1:])
        args.command = argv[0]
    else:
        parser = build_parser()
        args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    if args.quiet and args.verbose:
        parser.error("-q and -v cannot be used together (-q prints nothing, -v everything)")
    if getattr(args, "jobs", 1) > MAX_JOBS:  # one line: the usage would hide it
        print(f"opshift {args.command}: error: argument -j/--jobs: at most {MAX_JOBS}, got "
              f"{args.jobs} (more workers than cores, or models, are not started anyway)",
              file=sys.stderr)
        return 2
    verbose = getattr(args, "verbose", 0)
    try:
        # A command builds the model's objects once and holds them until it ends: the
        # cyclic collector, walking them again at every threshold, found nothing to free
        # and cost up to a tenth of a run (fix, inline, inspect at 100k nodes).
        # (-j N divides it among the workers once N is capped: see opshift.cli.batch.run)
        with no_cyclic_gc(), bounded_address_space():
            code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _stdout_closed()
    except OpshiftError as e:
        _json_error(args, e)
        if verbose:
            traceback.print_exc()
        print(f"opshift {args.command}: error: {printable(_naming_the_file(str(e), args))}",
              file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("opshift: interrupted", file=sys.stderr)
        return 130
    except MemoryError:
        print(f"opshift {args.command}: error: out of memory", file=sys.stderr)
        return 2
    except Exception as e:  # a bug in opshift, not in the input
        if verbose:
            traceback.print_exc()
        what = str(e).splitlines()[0] if str(e).strip() else ""
        what = printable(f"{type(e).__name__}: {what}" if what else type(e).__name__)
        hint = "" if verbose else " (run with -v for the traceback)"
        print(f"opshift {args.command}: internal error: {what}{hint}", file=sys.stderr)
        return INTERNAL_ERROR


def _json_error(args, e: OpshiftError) -> None:
    """With --json, an error is also a JSON object on stdout (ok false, the error)."""
    if not getattr(args, "json", False):
        return
    from opshift.cli.output import Outcome

    inputs = getattr(args, "inputs", None) or [getattr(args, "reference", None)]
    file = inputs[0] if len(inputs) == 1 else None
    print(Outcome(args.command, file).fail(e, e.exit_code, file).json_line(), flush=True)


def _naming_the_file(msg: str, args: argparse.Namespace) -> str:
    """``msg``, led by the input file when it names neither the input nor the output or a
    file beside it (an error from deep in a pass or the evaluator knows the node, not the
    file)."""
    inputs = getattr(args, "inputs", None) or []
    src = inputs[0] if len(inputs) == 1 else getattr(args, "input", None)
    out = getattr(args, "output", None)
    named = [str(src), str(out)] if out else [str(src)]
    if out and os.path.dirname(out):
        named.append(os.path.join(os.path.dirname(out), ""))  # an external data file's folder
    if not src or any(n in msg for n in named):
        return msg
    return f"{src}: {msg}"


#: The most ``-j`` accepts: more is a slip of the keyboard, not a machine.
MAX_JOBS = 1024
#: Exit code of a bug in opshift (an exception that is not an :class:`OpshiftError`).
INTERNAL_ERROR = 3
#: Exit code when the reader of stdout went away (128 + SIGPIPE, what a shell reports).
STDOUT_CLOSED = 141


def _stdout_closed() -> int:
    """The reader of stdout is gone (``| head``): end quietly. What is still buffered for
    stdout is dropped, and stdout points at /dev/null so that the flush at interpreter exit
    finds nothing to complain about."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # stdout is not a file (in-process caller)
        pass
    return STDOUT_CLOSED

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
