"""Models whose tensors live in external data files, for the tests of reading and writing
them (test_external_reads.py, test_external_writes.py, test_signals.py)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import onnx
from conftest import make_model, vi
from onnx import TensorProto, helper, numpy_helper

F = TensorProto.FLOAT


def externalize(t: onnx.TensorProto, folder: Path | None, location: str = "w.bin", *,
                entries: dict[str, str] | None = None) -> onnx.TensorProto:
    """``t`` with its bytes moved to ``folder/location`` (not written when ``folder`` is
    None) and the external data entries given (default: location, offset 0, length)."""
    if folder is not None:
        (folder / location).parent.mkdir(parents=True, exist_ok=True)
        (folder / location).write_bytes(t.raw_data)
    if entries is None:
        entries = {"location": location, "offset": "0", "length": str(len(t.raw_data))}
    t.ClearField("raw_data")
    t.data_location = TensorProto.EXTERNAL
    for k, v in entries.items():
        e = t.external_data.add()
        e.key, e.value = k, v
    return t


def legacy_prelu(folder: Path | None, slope: np.ndarray, **kw) -> onnx.ModelProto:
    """PRelu at opset 8 (where inline's decomposition depends on the slope's value) with a
    [3,1,1] slope in external file ``w.bin``."""
    w = externalize(numpy_helper.from_array(slope.astype(np.float32).reshape(3, 1, 1),
                                            "slope"), folder, **kw)
    return make_model([helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")],
                      [vi("x", F, [1, 3, 2, 2])], [vi("y", F, [1, 3, 2, 2])], opset=8,
                      initializers=[w])


def max_slope(folder: Path | None, a: float) -> onnx.ModelProto:
    """Max(x, a*x), which fuse turns into PRelu only when 0 < a <= 1; ``a`` in external
    file ``a.bin``."""
    w = externalize(numpy_helper.from_array(np.array(a, np.float32), "a"), folder, "a.bin")
    return make_model([helper.make_node("Mul", ["x", "a"], ["t"], name="mul"),
                       helper.make_node("Max", ["x", "t"], ["y"], name="max")],
                      [vi("x", F, [4])], [vi("y", F, [4])], opset=17, initializers=[w])


def tensor_alpha(folder: Path | None, alpha: float) -> onnx.ModelProto:
    """LeakyRelu whose alpha is a one-element TENSOR attribute (a defect fix repairs) kept
    in external file ``alpha.bin``."""
    t = externalize(numpy_helper.from_array(np.array([alpha], np.float32), "alpha_t"),
                    folder, "alpha.bin")
    node = helper.make_node("LeakyRelu", ["x"], ["y"], name="lrelu")
    node.attribute.append(helper.make_attribute("alpha", t))
    return make_model([node], [vi("x", F, [4])], [vi("y", F, [4])], opset=13)


def weights_model(folder: Path, megabytes: float, *, nodes: int = 1, location="w.bin",
                  opset: int = 13) -> onnx.ModelProto:
    """``x + w`` then a chain of ``nodes`` LeakyRelu, with ``w`` (random, real bytes: no
    holes) of ``megabytes`` MiB in external file ``location``; saved as ``folder/m.onnx``."""
    n = int(megabytes * (1 << 20)) // 4
    (folder / location).parent.mkdir(parents=True, exist_ok=True)
    (folder / location).write_bytes(np.random.default_rng(0).bytes(n * 4))
    w = onnx.TensorProto(name="w", data_type=F, dims=[n])
    externalize(w, None, location, entries={"location": location, "offset": "0",
                                            "length": str(n * 4)})
    chain = [helper.make_node("Add", ["x", "w"], ["h0"], name="add")]
    chain += [helper.make_node("LeakyRelu", [f"h{i}"], [f"h{i + 1}"], name=f"l{i}",
                               alpha=0.1) for i in range(nodes)]
    m = make_model(chain, [vi("x", F, [n])], [vi(f"h{nodes}", F, [n])], opset=opset,
                   initializers=[w])
    write(folder / "m.onnx", m)
    return m


def write(path: Path, model: onnx.ModelProto) -> None:
    path.write_bytes(model.SerializeToString())


def listing(folder: Path) -> dict[str, tuple[str, int]]:
    """name -> (kind, size) of everything under ``folder`` (links not followed)."""
    out = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            p = Path(root) / name
            st = p.lstat()
            kind = "link" if p.is_symlink() else "dir" if p.is_dir() else "file"
            out[str(p.relative_to(folder))] = (kind, st.st_size if kind == "file" else 0)
    return out


def max_slope_in_branch(folder: Path | None, a: float) -> onnx.ModelProto:
    """:func:`max_slope` inside an If's then-branch, ``a`` a Constant node's value kept in
    external file ``a.bin``."""
    t = externalize(numpy_helper.from_array(np.array(a, np.float32), "a"), folder, "a.bin")
    then = helper.make_graph([helper.make_node("Constant", [], ["ac"], value=t),
                              helper.make_node("Mul", ["x", "ac"], ["t"]),
                              helper.make_node("Max", ["x", "t"], ["yt"])],
                             "then", [], [vi("yt", F, [4])])
    other = helper.make_graph([helper.make_node("Identity", ["x"], ["ye"])], "else", [],
                              [vi("ye", F, [4])])
    return make_model([helper.make_node("If", ["c"], ["y"], then_branch=then,
                                        else_branch=other)],
                      [vi("x", F, [4]), vi("c", TensorProto.BOOL, [])], [vi("y", F, [4])],
                      opset=17)
