"""The commands the bench scripts time, each on its model (bench/models.py), with its floor
and target (issue 17).

=============  ======================================================  ==================
case           model (C=4 channels, value_info on every intermediate)  floor, target
=============  ======================================================  ==================
convert-9-16   opset 9, IR 4, weights listed as inputs                 onnx load+save 1.5x
convert-16-9   opset 16, IR 8                                          onnx load+save 1.5x
convert-6-17   opset 6, IR 3, weights listed as inputs, slope [C]      onnx load+save 1.5x
fix            opset 9, IR 4, 1-D slope [C] on [1,C,3,3] (fix: [C,1,1])  onnx load+save 1.5x
inspect        as convert-6-17 (read only)                             onnx load+save 1.2x
inline-18      opset 18, PRelu/LeakyRelu/Selu in turn                  load+save of its output 1.5x
inline-9       opset 9, PRelu (typed-constants band)                   load+save of its output 1.5x
fuse           opset 18, inline-18's model as ONNX function bodies      onnx_ir load+save 2x
=============  ======================================================  ==================

All models are Conv -> Add -> activation blocks with per-channel PRelu slopes; ``slopes``
(shared / every4 / distinct) says how PRelu nodes share them.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from _harness import (
    ONNX_IR_LOAD_SAVE,
    ONNX_LOAD,
    ONNX_LOAD_READ_SAVE,
    ONNX_LOAD_SAVE,
    PY,
    Job,
    Tree,
)


@dataclasses.dataclass(frozen=True)
class Case:
    """A command on its model: ``args`` follow ``opshift``, with IN for the model; writing
    commands get ``-o OUT -q``."""

    key: str
    spec: dict
    args: tuple
    floor: str  # "onnx", "onnx_out" (load+save of the command's output) or "onnx_ir"
    target: float
    writes: bool = True
    by_hand: bool = False  # bench/by_hand.py writes the same edits: timed beside it

    def model_spec(self, nodes: int, **overrides) -> dict:
        return {**self.spec, **overrides, "nodes": nodes}

    def job(self, tree: Tree, src: Path, out_dir: Path, *extra: str, tag: str = "") -> Job:
        """The command on ``src`` for ``tree`` with ``extra`` options, writing under
        ``out_dir``; the job is named ``tree.label + tag``."""
        args = [src if a == "IN" else a for a in self.args]
        name = tree.label + tag
        out = out_dir / f"{_safe(name)}-{self.key}.onnx"
        if self.writes:
            cmd = tree.opshift(*args, *extra, "-o", out, "-q")
        else:
            cmd = tree.opshift(*args, *extra)
        return Job(name, cmd, dict(tree.env), out if self.writes else None)


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)


CASES = {c.key: c for c in (
    Case("convert-9-16", {"opset": 9}, ("convert", "IN", "--opset", "16"), "onnx", 1.5),
    Case("convert-16-9", {"opset": 16}, ("convert", "IN", "--opset", "9"), "onnx", 1.5),
    Case("convert-6-17", {"opset": 6}, ("convert", "IN", "--opset", "17"), "onnx", 1.5,
         by_hand=True),
    Case("fix", {"opset": 9, "slope_defect": True}, ("fix", "IN"), "onnx", 1.5, by_hand=True),
    Case("inspect", {"opset": 6}, ("inspect", "IN"), "onnx", 1.2, writes=False),
    Case("inline-18", {"opset": 18, "acts": "mixed"}, ("inline", "IN"), "onnx_out", 1.5),
    Case("inline-9", {"opset": 9}, ("inline", "IN"), "onnx_out", 1.5),
    Case("fuse", {"opset": 18, "acts": "mixed", "decomposed": True}, ("fuse", "IN"),
         "onnx_ir", 2.0),
)}


def select(names: str) -> list[Case]:
    """Cases by key or by command (``convert`` = every convert case), comma-separated."""
    out: list[Case] = []
    for name in names.split(","):
        name = name.strip()
        found = [c for k, c in CASES.items() if k == name or k.split("-")[0] == name]
        if not found:
            raise SystemExit(f"unknown case {name!r}: one of {', '.join(CASES)} or a command")
        out += [c for c in found if c not in out]
    return out


def floor_job(kind: str, src: Path, out_dir: Path, name: str) -> Job:
    """A whole-process floor: ``onnx`` / ``onnx_out`` (onnx.load + onnx.save), ``load``
    (onnx.load), ``read`` (onnx.load, one Python pass over every node, value_info entry and
    initializer, onnx.save), ``onnx_ir`` (onnx_ir.load + onnx_ir.save) of ``src``, or a
    case's key: its edits written by hand (bench/by_hand.py)."""
    out = out_dir / f"floor-{_safe(name)}.onnx"
    if kind in CASES:
        return Job(name, [PY, str(Path(__file__).with_name("by_hand.py")), kind, str(src),
                          str(out)], output=out)
    if kind in ("onnx", "onnx_out"):
        return Job(name, [PY, "-c", ONNX_LOAD_SAVE, str(src), str(out)], output=out)
    if kind == "load":
        return Job(name, [PY, "-c", ONNX_LOAD, str(src)])
    if kind == "read":
        return Job(name, [PY, "-c", ONNX_LOAD_READ_SAVE, str(src), str(out)], output=out)
    if kind == "onnx_ir":
        return Job(name, [PY, "-c", ONNX_IR_LOAD_SAVE, str(src), str(out)], output=out)
    raise ValueError(kind)
