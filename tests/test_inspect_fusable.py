"""``opshift inspect`` lists the decomposed activations ``opshift fuse`` would fuse (how many,
which form, whether only with --allow-rounding and why) and the matches it would refuse,
in its text and in --json; what it says agrees with what fuse then does."""

from __future__ import annotations

import json
import re

import exporter_models as em
import onnx
import pytest
from clirun import opshift
from conftest import MODELS

EXPORTERS = ["tf2onnx_prelu_nhwc", "keras2onnx_prelu_ops", "torchscript_where",
             "tf1_leaky_relu_maximum", "keras_selu_tf2onnx", "torchscript_clamps",
             "paddle2onnx_scale", "dynamo_selu", "tf2onnx_prelu_dense", "dynamo_prelu_kernel"]


def _save(tmp_path, name: str):
    path = tmp_path / f"{name}.onnx"
    onnx.save(getattr(em, name)(), path)
    return path


def _fusable(path) -> dict:
    p = opshift("inspect", path, "--json")
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)["details"]["fusable"]


def _fused_count(path, out, *flags) -> int:
    p = opshift("fuse", path, "-o", out, "--force", *flags)
    assert p.returncode == 0, p.stderr
    return int(re.search(r"fused (\d+) pattern", p.stdout)[1])


def test_a_keras_prelu_from_tf2onnx_is_listed_with_why_it_needs_allow_rounding(tmp_path):
    src = _save(tmp_path, "tf2onnx_prelu_nhwc")
    p = opshift("inspect", src)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert "no PRelu, LeakyRelu or Selu nodes" in lines
    assert ("decomposed activations 'opshift fuse' would fuse: 1 pattern, 1 of them only "
            "with --allow-rounding") in lines
    row = next(x for x in lines if x.lstrip().startswith("PRelu "))
    assert row.split()[:11] == ["PRelu", "Neg", "+", "Relu", "+", "Mul", "+", "Relu", "+",
                                "Add", "ReluAddNegSlope"]
    assert row.split()[-2:] == ["1", "--allow-rounding"]
    why = p.stdout[p.stdout.index("--allow-rounding, ReluAddNegSlope:"):]
    assert "at x = -0 the pattern gives +0" in why and "PRelu gives -0" in why
    (d,) = _fusable(src)["patterns"]
    assert d["into"] == "PRelu" and d["allow_rounding"] is True
    assert d["node"] == "StatefulPartitionedCall/model/p_re_lu/add"
    assert d["form"] == ["Neg", "Relu", "Mul", "Relu", "Add"]
    # fuse agrees: nothing without the flag, the PRelu with it
    assert _fused_count(src, tmp_path / "a.onnx") == 0
    assert _fused_count(src, tmp_path / "b.onnx", "--allow-rounding") == 1


def test_an_exact_pattern_needs_no_flag_and_all_names_its_node(tmp_path):
    src = _save(tmp_path, "torchscript_where")
    p = opshift("inspect", src, "--all")
    assert "decomposed activations 'opshift fuse' would fuse: 1 pattern" in p.stdout
    assert "only with --allow-rounding" not in p.stdout
    row = next(x for x in p.stdout.splitlines() if x.startswith("/Where "))
    assert row.split() == ["/Where", "graph", "'g'", "PRelu", "Mul", "+", "Greater", "+",
                           "Where", "WhereSlopeMirrored", "-"]
    (d,) = _fusable(src)["patterns"]
    assert (d["allow_rounding"], d["why"], d["into"]) == (False, None, "PRelu")


def test_a_refused_match_is_counted_and_all_says_why(tmp_path):
    src = _save(tmp_path, "torchscript_clamps")
    p = opshift("inspect", src)
    assert "'opshift fuse' would refuse 1 match (why: --all, or 'opshift fuse -v')" in p.stdout
    assert "would fuse" not in p.stdout
    p = opshift("inspect", src, "--all")
    assert "graph 'g', node '/Add' (Add, rule ClipClipSlope): Clip without a max" in p.stdout
    d = _fusable(src)
    assert d["patterns"] == [] and [r["node"] for r in d["refused"]] == ["/Add"]


def test_nothing_decomposed_is_said_in_one_line():
    p = opshift("inspect", MODELS / "prelu6_conv_per_channel.onnx")
    assert "no decomposed activations for opshift fuse" in p.stdout.splitlines()
    assert _fusable(MODELS / "prelu6_conv_per_channel.onnx") == {"patterns": [],
                                                                  "refused": []}


@pytest.mark.parametrize("name", EXPORTERS)
def test_inspect_counts_what_fuse_fuses(name):
    from opshift.fuse.driver import fuse_with_result
    from opshift.inspect import inspect

    m = getattr(em, name)()
    d = inspect(m).fusable
    assert all(p["why"] for p in d["patterns"] if p["allow_rounding"])
    exact = [p["node"] for p in d["patterns"] if not p["allow_rounding"]]
    assert [e.node for e in fuse_with_result(m)[1].fused] == exact
    assert sorted(e.node for e in fuse_with_result(m, allow_rounding=True)[1].fused) == sorted(
        p["node"] for p in d["patterns"])
