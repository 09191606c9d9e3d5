"""Every subcommand's help shows a runnable example, and the top-level help lists them all."""

from __future__ import annotations

import onnx
import pytest

from opshift.cli import COMMANDS, main


@pytest.mark.parametrize("command", COMMANDS)
def test_subcommand_help_has_an_example(command, capsys):
    with pytest.raises(SystemExit) as e:
        main([command, "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "example" in out.lower()
    assert f"opshift {command}" in out


def test_top_level_help_lists_commands_and_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    for command in COMMANDS:
        assert command in out
    assert "exit codes" in out


def test_no_command_prints_help_and_exits_2(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().out


@pytest.mark.parametrize("command", COMMANDS)
def test_a_run_parses_with_the_commands_own_parser_as_the_full_one_would(command, capsys):
    """main() builds only the named command's parser: same help, same defaults, same
    errors as that command under the full parser."""
    import argparse

    from opshift.cli import build_parser, command_parser

    full = build_parser()
    sub = next(a for a in full._actions if isinstance(a, argparse._SubParsersAction))
    under_full, alone = sub.choices[command], command_parser(command)
    assert alone.format_help() == under_full.format_help()
    assert alone.prog == under_full.prog == f"opshift {command}"
    argv = ["m.onnx", "m2.onnx"][:1 + (command == "verify")] if command != "ops" else []
    for opt in ("-o", "--opset"):  # required options where the command has them
        if any(opt in x.option_strings and x.required for x in alone._actions):
            argv += [opt, "9" if opt == "--opset" else "o.onnx"]
    a = vars(full.parse_args([command, *argv]))
    b = vars(alone.parse_args(argv))
    b["command"] = command
    assert a == b
    for parser, args in ((full, [command, "--no-such-option"]), (alone, ["--no-such-option"])):
        with pytest.raises(SystemExit) as e:
            parser.parse_args(args)
        assert e.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[-1] == next(x for x in err if x.startswith(f"opshift {command}: error"))


# Runs the commands that need no onnx_ir, then lists the heavy modules that got imported.
_LIGHT = """
import sys
from opshift.cli import main
src, out = sys.argv[1], sys.argv[2]
for argv in (["inline", src, "-o", out, "-q"], ["convert", src, "--opset", "9", "-o", out, "-q"],
             ["fix", src, "-o", out, "-q"], ["inspect", src, "-q"],
             ["verify", src, out, "-q"]):
    assert main(argv) in (0, 1), argv
print(sorted(m for m in ("onnx_ir", "onnxscript", "sympy") if m in sys.modules))
"""


def test_commands_but_fuse_never_import_onnx_ir(tmp_path):
    """onnx_ir imports sympy (~0.3 s, ten times what inline takes on 1,000 nodes): only fuse
    and the onnx_ir pass adapters may load it."""
    import subprocess
    import sys

    from conftest import MODELS, ROOT

    out = tmp_path / "o.onnx"
    p = subprocess.run([sys.executable, "-c", _LIGHT, str(MODELS / "small_cnn.onnx"),
                        str(out)], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]"


_FUSE = """
import sys
from opshift.cli import main
assert main(["fuse", *sys.argv[1:], "-q"]) == 0
print("onnx_ir" in sys.modules)
"""


@pytest.mark.parametrize("decomposed", [False, True])
def test_fuse_loads_onnx_ir_only_for_a_model_that_may_hold_a_pattern(tmp_path, decomposed):
    """A model with none of the ops every fuse rule needs one of (no Mul, no Cast) has nothing
    to fuse: fuse writes it unchanged without loading onnx_ir; an inlined one is fused."""
    import subprocess
    import sys

    from conftest import MODELS, ROOT

    src = MODELS / "small_cnn.onnx"
    if decomposed:
        assert main(["inline", str(src), "-o", str(tmp_path / "i.onnx"), "-q"]) == 0
        src = tmp_path / "i.onnx"
    out = tmp_path / "o.onnx"
    p = subprocess.run([sys.executable, "-c", _FUSE, str(src), "-o", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == str(decomposed)
    kinds = {n.op_type for n in onnx.load(out).graph.node}
    assert "PRelu" in kinds and "Mul" not in kinds
    if not decomposed:
        assert out.read_bytes() == src.read_bytes()


def test_json_help_lists_the_keys_a_json_line_has():
    import re

    from clirun import json_lines, opshift
    from conftest import MODELS

    p = opshift("--help")
    assert p.returncode == 0 and "see 'opshift --help'" not in p.stdout
    text = " ".join(p.stdout.split())  # argparse wraps the help
    m = re.search(r"--json one JSON object per model per line on stdout, keys: ([a-z_, ]+) ",
                  text)
    assert m, text
    (line,) = json_lines(opshift("inspect", MODELS / "prelu7.onnx", "--json").stdout)
    assert m.group(1).split(", ") == list(line)


def test_allow_rounding_help_names_each_family_it_enables():
    from clirun import opshift

    p = opshift("fuse", "--help")
    text = " ".join(p.stdout.split())
    assert p.returncode == 0 and "also fuse Elu(x)*gamma into Selu, which" not in text
    for family in ("Relu(x) + c*Relu(-x) (tf2onnx/keras2onnx Keras PReLU)",
                   "Relu/Max/Clip + s*Min/Clip pairs (TorchScript clamp)",
                   "s*x + 0 (paddle2onnx scale", "Where(x <= 0, s*x, x) with a negative slope",
                   "Elu(x)*gamma", "gamma*Where(x > 0, Elu(x), alpha*Elu(x))",
                   "computed in 16 bits"):
        assert family in text, family
