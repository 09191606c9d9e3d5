"""inline then fuse gives the fused node the name of the node inline replaced
(``prelu1``, not ``prelu1/Y``), when that name is free; any other fusion keeps its anchor's."""

from __future__ import annotations

import onnx
import pytest
from clirun import opshift
from conftest import MODELS, make_model
from onnx import TensorProto as T
from onnx import helper


def _names(model) -> list[tuple[str, str]]:
    """(op, name) of the nodes but Constants, of a model or a path."""
    m = model if isinstance(model, onnx.ModelProto) else onnx.load(model)
    return [(n.op_type, n.name) for n in m.graph.node if n.op_type != "Constant"]


@pytest.mark.parametrize("opset", [6, 9, 13, 17])
def test_inline_then_fuse_gives_the_names_back(opset):
    import opshift

    src = opshift.convert(onnx.load(MODELS / "prelu6_conv_per_channel.onnx"), opset)
    flat = opshift.inline(src)
    assert all(n.name.startswith("prelu1/") for n in flat.graph.node if n.op_type != "Conv")
    back = opshift.fuse(flat)
    assert _names(back) == _names(src) == [("Conv", "conv1"), ("PRelu", "prelu1")]


def test_every_activation_of_a_model_gets_its_name_back(tmp_path):
    src, flat, back = tmp_path / "m.onnx", tmp_path / "flat.onnx", tmp_path / "back.onnx"
    assert opshift("convert", MODELS / "small_cnn.onnx", "--opset", "17", "-o",
                   src).returncode == 0
    assert opshift("inline", src, "-o", flat).returncode == 0
    p = opshift("fuse", flat, "-o", back, "--verify")
    assert p.returncode == 0, p.stdout + p.stderr
    acts = {"PRelu", "LeakyRelu", "Selu"}
    want = [(op, name) for op, name in _names(src) if op in acts]
    assert want and [(op, name) for op, name in _names(back) if op in acts] == want


def test_a_taken_name_or_another_form_keeps_the_anchor_s_name(tmp_path):
    """A node already called ``p`` keeps it: the fused node is ``p/Y`` then; a pattern no
    inline wrote (named otherwise) keeps its anchor's name."""
    vi = [helper.make_tensor_value_info(n, T.FLOAT, [2, 3]) for n in ("x", "y", "z")]
    zero = helper.make_node("Constant", [], ["p/Zero"], name="p/Zero",
                            value=helper.make_tensor("z", T.FLOAT, [], [0.0]))
    slope = helper.make_node("Constant", [], ["s"], name="s",
                             value=helper.make_tensor("s", T.FLOAT, [], [0.25]))
    nodes = [zero, slope,
             helper.make_node("Less", ["x", "p/Zero"], ["p/L"], name="p/XLessThanZero"),
             helper.make_node("Mul", ["s", "x"], ["p/M"], name="p/SlopeMulX"),
             helper.make_node("Where", ["p/L", "p/M", "x"], ["y"], name="p/Y"),
             helper.make_node("Relu", ["y"], ["z"], name="p")]
    src = tmp_path / "m.onnx"
    onnx.save(make_model(nodes, vi[:1], vi[2:], opset=17), src)
    p = opshift("fuse", src, "-o", tmp_path / "a.onnx")
    assert p.returncode == 0 and "fused 1 pattern" in p.stdout, p.stdout + p.stderr
    assert _names(tmp_path / "a.onnx") == [("LeakyRelu", "p/Y"), ("Relu", "p")]
    nodes[-1].name = "relu"
    nodes[3].name = "mul"  # not all named p/...: not what inline writes
    onnx.save(make_model(nodes, vi[:1], vi[2:], opset=17), src)
    assert opshift("fuse", src, "-o", tmp_path / "b.onnx").returncode == 0
    assert _names(tmp_path / "b.onnx") == [("LeakyRelu", "p/Y"), ("Relu", "relu")]
    nodes[3].name = "p/SlopeMulX"
    onnx.save(make_model(nodes, vi[:1], vi[2:], opset=17), src)
    assert opshift("fuse", src, "-o", tmp_path / "c.onnx").returncode == 0
    assert _names(tmp_path / "c.onnx") == [("LeakyRelu", "p"), ("Relu", "relu")]
