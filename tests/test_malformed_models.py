"""Models protobuf parses but no tool can use, through every command: one line on stderr naming
the file and what is wrong, exit 2, the input untouched and nothing written (issue 13)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from conftest import digest, make_model, vi
from google.protobuf.internal import encoder
from onnx import TensorProto, helper, numpy_helper

from opshift.cli import main

F, S = TensorProto.FLOAT, TensorProto.STRING
COMMANDS = {
    "convert": ["--opset", "13", "-o", "OUT"],
    "convert --verify": ["--opset", "13", "--verify", "-o", "OUT"],
    "inline": ["-o", "OUT"],
    "inline --verify": ["--verify", "-o", "OUT"],
    "fuse": ["-o", "OUT"],
    "fix": ["-o", "OUT"],
    "fix --verify": ["--verify", "-o", "OUT"],
    "inspect": [],
    "verify": ["SRC"],
}


SHAPE = (1, 3, 4, 4)  # x's and y's shape unless said


def _good(opset=9) -> onnx.ModelProto:
    slope = numpy_helper.from_array(np.full((3, 1, 1), 0.25, np.float32), "slope")
    return make_model([helper.make_node("PRelu", ["x", "slope"], ["y"], name="prelu")],
                      [vi("x", F, SHAPE)], [vi("y", F, SHAPE)], opset=opset, initializers=[slope])


def _edit(fn, opset=9):
    def make():
        m = _good(opset)
        fn(m)
        return m.SerializeToString()
    return make


def _bytes_replaced(old: bytes, new: bytes, fn=lambda m: None):
    """The good model's bytes with ``old`` replaced (how a name that is not UTF-8 is made:
    onnx's helpers refuse to)."""
    def make():
        m = _good()
        fn(m)
        data = m.SerializeToString()
        assert old in data
        return data.replace(old, new)
    return make


def _one(node, x_elem=F, opset=13):
    return lambda: make_model([node], [vi("x", x_elem, SHAPE)], [vi("y", x_elem, SHAPE)],
                              opset=opset).SerializeToString()


def _set_node_name(m):
    m.graph.node[0].name = "NODENAMEX"


def _input_elem(v):
    def fn(m):
        m.graph.input[0].type.tensor_type.elem_type = v
    return fn


def _init(**kw):
    def fn(m):
        t = m.graph.initializer[0]
        if "dims" in kw:
            del t.dims[:]
            t.dims.extend(kw["dims"])
        if "raw" in kw:
            t.raw_data = t.raw_data[:kw["raw"]]
        if "floats" in kw:
            t.ClearField("raw_data")
            t.float_data.extend(kw["floats"])
        if "data_type" in kw:
            t.data_type = kw["data_type"]
    return fn


def _string_tensor(m):
    m.graph.initializer.append(helper.make_tensor("words", S, [1], [b"\xff\xfe"]))


def _functions(*bodies):
    """Functions local::NAME whose bodies call the named functions, and a main graph calling
    the first."""
    def make():
        fs = [helper.make_function("local", name, ["a"], ["b"],
                                   [helper.make_node(callee, ["a"], ["b"], domain="local")],
                                   [helper.make_opsetid("", 13)])
              for name, callee in bodies]
        return make_model([helper.make_node(bodies[0][0], ["x"], ["y"], domain="local",
                                            name="call")], [vi("x", F, SHAPE)],
                          [vi("y", F, SHAPE)], opset=13, functions=fs,
                          extra_opsets=[helper.make_opsetid("local", 1)]
                          ).SerializeToString()
    return make


def _opsets(*imports):
    def fn(m):
        del m.opset_import[:]
        m.opset_import.extend(helper.make_opsetid(d, v) for d, v in imports)
    return fn


def _ir(v):
    def fn(m):
        m.ir_version = v
    return fn


def _ld(field: int, payload: bytes) -> bytes:
    return encoder.TagBytes(field, 2) + encoder._VarintBytes(len(payload)) + payload


def _too_deep():
    """Ifs nested inside each other's then_branch past protobuf's depth limit (100)."""
    data = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g", [],
                             [vi("y", F, SHAPE)]).SerializeToString()
    attr = helper.make_attribute("then_branch", onnx.GraphProto())
    attr.ClearField("g")
    for _ in range(40):
        node = helper.make_node("If", ["c"], ["y"]).SerializeToString()
        data = _ld(1, node + _ld(5, attr.SerializeToString() + _ld(6, data))) + b"\x12\x01g"
    m = make_model([], [vi("x", F, SHAPE)], [vi("y", F, SHAPE)], opset=13)
    m.ClearField("graph")
    return m.SerializeToString() + _ld(7, data)


def _sparse_slope(m):
    sp = onnx.SparseTensorProto()
    sp.values.CopyFrom(numpy_helper.from_array(np.array([0.25], np.float32), "slope"))
    sp.indices.CopyFrom(numpy_helper.from_array(np.array([0], np.int64), ""))
    sp.dims.extend([3, 1, 1])
    del m.graph.initializer[:]
    m.graph.sparse_initializer.append(sp)


CASES = {
    # name -> (bytes maker, what the one line must say)
    "node name not UTF-8": (_bytes_replaced(b"NODENAMEX", b"NODE\xff\xfeAMX", _set_node_name),
                            "node name b'NODE\\xff\\xfeAMX' is not valid UTF-8"),
    "value name not UTF-8": (_bytes_replaced(b"slope", b"sl\xffpe"), "is not valid UTF-8"),
    "input element type 999": (_edit(_input_elem(999)), "input 'x' has element type 999"),
    "initializer element type 999": (_edit(_init(data_type=999)),
                                     "initializer 'slope' has element type 999"),
    "value_info element type 65": (_edit(lambda m: m.graph.value_info.append(
        helper.make_tensor_value_info("x", 65, [1, 3, 4, 4]))),
        "value_info 'x' has element type 65"),
    "LeakyRelu without input": (_one(helper.make_node("LeakyRelu", [], ["y"], name="lr")),
                                "node 'lr' (LeakyRelu-6): takes 1 input and 1 output"),
    "LeakyRelu with two outputs": (_one(helper.make_node("LeakyRelu", ["x"], ["y", "z"],
                                                         name="lr")), "takes 1 input"),
    "PRelu with one input": (_one(helper.make_node("PRelu", ["x"], ["y"], name="p")),
                             "node 'p' (PRelu-9): takes 2 inputs and 1 output"),
    "Selu with two inputs": (_one(helper.make_node("Selu", ["x", "x"], ["y"], name="s")),
                             "takes 1 input"),
    "LeakyRelu over strings": (_one(helper.make_node("LeakyRelu", ["x"], ["y"], name="lr"),
                                    x_elem=S), "X 'x' is string, which no version of LeakyRelu"),
    "PRelu over strings": (_one(helper.make_node("PRelu", ["x", "x"], ["y"], name="p"),
                                x_elem=S), "X 'x' is string"),
    "Selu over strings": (_one(helper.make_node("Selu", ["x"], ["y"], name="s"), x_elem=S),
                          "X 'x' is string"),
    "negative initializer dim": (_edit(_init(dims=[-3, 1, 1])),
                                 "initializer 'slope' has a negative dimension"),
    "2**62 initializer dim": (_edit(_init(dims=[2 ** 62, 1, 1])),
                              "more than a model file can hold"),
    "raw data too short": (_edit(_init(raw=-4)),
                           "initializer 'slope' has 8 bytes of raw data for dims [3, 1, 1] "
                           "of FLOAT (12 expected)"),
    "float_data too short": (_edit(_init(floats=[1.0, 2.0])),
                             "holds 2 values in float_data for dims [3, 1, 1] (3 expected)"),
    "string tensor not UTF-8": (_edit(_string_tensor),
                                "initializer 'words': string element 0"),
    "recursive function": (_functions(("F", "F")), "function local::F -> local::F: a function "
                                                   "that calls itself"),
    "mutually recursive functions": (_functions(("F", "G"), ("G", "F")),
                                     "local::F -> local::G -> local::F"),
    "'' imported twice": (_edit(_opsets(("", 13), ("", 9))),
                          "domain 'ai.onnx' is imported twice, at opsets 13 and 9"),
    "'' and 'ai.onnx' at two versions": (_edit(_opsets(("", 13), ("ai.onnx", 9))),
                                         "imported twice"),
    "IR version 1": (_edit(_ir(1)), "IR version 1 is outside 3.."),
    "IR version 99": (_edit(_ir(99)), "IR version 99 is outside 3.."),
    "nested past protobuf's limit": (_too_deep, "nested too deeply"),
    "sparse initializer as slope": (_edit(_sparse_slope), "sparse initializers are not "
                                                          "supported"),
}



@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize("case", list(CASES))
def test_malformed_model_is_refused_in_one_line(tmp_path, capsys, command, case):
    make, needle = CASES[case]
    src = tmp_path / "in" / "model.onnx"
    src.parent.mkdir()
    src.write_bytes(make())
    (tmp_path / "out").mkdir()
    before = digest(src)
    rest = [str(src) if a == "SRC" else str(tmp_path / "out" / "o.onnx") if a == "OUT" else a
            for a in COMMANDS[command]]
    code = main([command.split()[0], str(src), *rest])
    err = capsys.readouterr().err
    assert code == 2, f"{command} on {case}: exit {code}, stderr: {err}"
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(src) in err and needle in err, err
    assert digest(src) == before and not list((tmp_path / "out").iterdir())


def test_same_opset_imported_twice_is_accepted(tmp_path):
    """'' and 'ai.onnx' at one version say the same thing twice: nothing is ambiguous."""
    src = tmp_path / "m.onnx"
    src.write_bytes(_edit(_opsets(("", 9), ("ai.onnx", 9)))())
    assert main(["convert", str(src), "--opset", "13", "-o", str(tmp_path / "o.onnx")]) == 0


@pytest.mark.parametrize("argv", [["inspect", "SRC", "--opset", "6"],
                                  ["inline", "SRC", "-o", "OUT", "-v"],
                                  ["convert", "SRC", "--opset", "6", "-o", "OUT"]])
def test_names_are_printed_escaped(tmp_path, capsys, argv):
    """A node name holding a newline and an escape sequence neither breaks a line of output
    nor reaches the terminal: it is shown as its Python escapes."""
    m = _good()
    m.graph.node[0].name = "evil\n\x1b[31mred"
    # a last-axis slope on X with as many channels: rewritten (to [1, 4]) at opset 6
    for vis, name in ((m.graph.input, "x"), (m.graph.output, "y")):
        vis[0].CopyFrom(vi(name, F, (1, 4, 4, 4)))
    m.graph.initializer[0].CopyFrom(numpy_helper.from_array(np.full(4, 0.25, np.float32),
                                                            "slope"))
    src = tmp_path / "m.onnx"
    src.write_bytes(m.SerializeToString())
    argv = [str(src) if a == "SRC" else str(tmp_path / "o.onnx") if a == "OUT" else a
            for a in argv]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "evil\n" not in out
    assert "evil\\n\\x1b[31mred" in out


def test_error_lines_are_escaped_and_name_the_file(tmp_path, capsys):
    """An error deep in --verify (the evaluator reading a tensor) names the input file; a
    name in an error line is escaped like everywhere else."""
    src = tmp_path / "m.onnx"
    slope = numpy_helper.from_array(np.full((3, 64, 64), 0.25, np.float32), "sl\nope")
    slope.raw_data = slope.raw_data[:-4]  # (past the size the structural check measures)
    m = make_model([helper.make_node("PRelu", ["x", "sl\nope"], ["y"], name="prelu")],
                   [vi("x", F, (1, 3, 64, 64))], [vi("y", F, (1, 3, 64, 64))], opset=9,
                   initializers=[slope])
    src.write_bytes(m.SerializeToString())
    code = main(["convert", str(src), "--opset", "13", "--verify", "-o",
                 str(tmp_path / "o.onnx")])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"opshift convert: error: {src}: ") and "'sl\\nope'" in err, err
    assert "49148 bytes of raw data for dims [3, 64, 64] of FLOAT (49152 expected)" in err, err


def test_api_opset_of_the_wrong_type():
    import opshift
    from opshift.errors import OpshiftError

    for bad in ("13", 13.0, True):
        with pytest.raises(TypeError, match="opset must be an int") as e:
            opshift.convert(_good(), bad)
        assert isinstance(e.value, OpshiftError)
