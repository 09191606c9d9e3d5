"""opshift.verify and ``opshift verify``: inputs, comparison policy, reports, CLI errors."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from conftest import ROOT, make_model
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from opshift import cli
from opshift.errors import OpshiftError, VerificationError
from opshift.verify import (
    DEFAULT_DIM,
    Rewrite,
    check_rewrites,
    compare,
    evaluator_supports,
    make_inputs,
    region_key,
    region_model,
    special_values,
    verify,
    verify_rewrites,
)

BF16 = np.dtype(ml_dtypes.bfloat16)


# ---------------------------------------------------------------------------------------------
# models
# ---------------------------------------------------------------------------------------------
def prelu_model(slope=(0.1, 0.2, 0.3), *, opset=9, xdims=("N", 3, 2, 2), elem=T.FLOAT,
                out_name="y"):
    x = helper.make_tensor_value_info("x", elem, list(xdims))
    y = helper.make_tensor_value_info(out_name, elem, None)
    dt = helper.tensor_dtype_to_np_dtype(elem)
    s = numpy_helper.from_array(np.array(slope, dtype=np.float64).astype(dt).reshape(-1, 1, 1),
                                "slope")
    return make_model([helper.make_node("PRelu", ["x", "slope"], [out_name], name="prelu")],
                      [x], [y], opset=opset, initializers=[s])


def leaky_model(alpha, *, opset=16, shape=(4, 8), elem=T.FLOAT):
    x = helper.make_tensor_value_info("x", elem, list(shape))
    y = helper.make_tensor_value_info("y", elem, list(shape))
    return make_model([helper.make_node("LeakyRelu", ["x"], ["y"], name="lr", alpha=alpha)],
                      [x], [y], opset=opset)


def selu_model(alpha, gamma, *, opset=22, shape=(4, 8), elem=T.FLOAT):
    x = helper.make_tensor_value_info("x", elem, list(shape))
    y = helper.make_tensor_value_info("y", elem, list(shape))
    return make_model([helper.make_node("Selu", ["x"], ["y"], name="selu", alpha=alpha,
                                        gamma=gamma)], [x], [y], opset=opset)


def save(model, path):
    onnx.save(model, str(path))
    return str(path)


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ---------------------------------------------------------------------------------------------
# verify
# ---------------------------------------------------------------------------------------------
def test_verify_passes_against_itself():
    m = prelu_model()
    r = verify(m, m)
    assert r.ok
    assert [row.output for row in r.rows] == ["y"]
    row = r.rows[0]
    assert (row.dtype, row.shape, row.max_abs, row.max_ulp) == ("float32", [2, 3, 2, 2], 0.0, 0)
    assert "pass" in r.table() and "FAIL" not in r.table()


def test_verify_fails_with_one_slope_value_changed():
    r = verify(prelu_model(), prelu_model(slope=(0.1, 0.25, 0.3)))
    assert not r.ok
    row = r.rows[0]
    assert not row.ok and row.max_ulp > 4 and row.max_abs > 0
    assert "more than 4 ulp" in row.reason
    assert "FAIL" in r.table()


def test_verify_accepts_ir_model_and_path(tmp_path):
    import onnx_ir as ir

    m = prelu_model()
    p = save(m, tmp_path / "m.onnx")
    assert verify(p, ir.serde.deserialize_model(m)).ok


def test_verify_given_inputs_are_used():
    x = np.repeat(np.array([-2.0, -2.0, 4.0], np.float32).reshape(1, 3, 1, 1), 4).reshape(
        1, 3, 2, 2)
    r = verify(prelu_model(), prelu_model(slope=(0.1, 0.2, 0.5)), {"x": x})
    # Channel 2 is positive, so the changed slope is invisible on these inputs.
    assert r.ok and r.rows[0].shape == [1, 3, 2, 2]
    r = verify(prelu_model(), prelu_model(slope=(0.1, 0.3, 0.3)), {"x": x})
    # channel 1: -2 * 0.2 vs -2 * 0.3 in float32
    assert not r.ok and r.rows[0].max_abs == pytest.approx(0.2, rel=1e-6)


def test_verify_output_name_and_count_mismatch():
    r = verify(prelu_model(), prelu_model(out_name="z"))
    assert not r.ok and "named 'y' in the reference and 'z'" in r.rows[0].reason
    two = prelu_model()
    two.graph.output.append(helper.make_tensor_value_info("x", T.FLOAT, None))
    r = verify(prelu_model(), two)
    assert [row.ok for row in r.rows] == [True, False]
    assert "extra output" in r.rows[1].reason
    r = verify(two, prelu_model())
    assert "missing from the candidate" in r.rows[1].reason


def test_verify_candidate_with_other_input_dtype_is_bad_input():
    with pytest.raises(OpshiftError, match=r"candidate: graph input 'x': dtype float32 given"):
        verify(leaky_model(0.5, elem=T.FLOAT), leaky_model(0.5, elem=T.DOUBLE))


def test_verify_report_merge_and_json():
    r1 = verify(prelu_model(), prelu_model())
    r2 = verify(prelu_model(), prelu_model(slope=(0.1, 0.2, 0.31)))
    merged = r1.merge(r2)
    assert merged is r1 and len(r1.rows) == 2 and not r1.ok
    d = json.loads(r1.to_json())
    assert d["ok"] is False and [row["ok"] for row in d["rows"]] == [True, False]
    assert d["tolerance_ulp"]["float32"] == 4
    with pytest.raises(VerificationError, match="verification failed: y"):
        r1.raise_if_failed()


def test_verify_symbolic_dims():
    m = prelu_model()
    r = verify(m, m, dims={"N": 5})
    assert r.rows[0].shape == [5, 3, 2, 2]
    assert verify(m, m).rows[0].shape == [DEFAULT_DIM, 3, 2, 2]


def test_verify_evaluator_failure_names_node():
    bad = prelu_model(slope=(0.1, 0.2, 0.3, 0.4, 0.5))  # [5,1,1] does not broadcast to C=3
    with pytest.raises(OpshiftError, match=r"candidate: .*node 'prelu'"):
        verify(prelu_model(), bad)


# ---------------------------------------------------------------------------------------------
# make_inputs
# ---------------------------------------------------------------------------------------------
def graph_with(elem, shape, name="x"):
    vi = helper.make_tensor_value_info(name, elem, list(shape))
    return helper.make_graph([], "g", [vi], [vi])


# Written out independently of ml_dtypes.finfo: (smallest subnormal, smallest normal, max).
FLOAT_EXTREMES = {
    T.FLOAT16: (np.float16, 2.0**-24, 2.0**-14, 65504.0),
    T.BFLOAT16: (BF16, 2.0**-133, 2.0**-126, (2 - 2**-7) * 2.0**127),
    T.FLOAT: (np.float32, 2.0**-149, 2.0**-126, (2 - 2**-23) * 2.0**127),
    T.DOUBLE: (np.float64, 2.0**-1074, 2.0**-1022, np.finfo(np.float64).max),
}


@pytest.mark.parametrize("elem", list(FLOAT_EXTREMES))
def test_make_inputs_float_special_values(elem):
    dt, sub, tiny, big = FLOAT_EXTREMES[elem]
    x = make_inputs(graph_with(elem, [5, 8]))["x"]
    assert x.dtype == np.dtype(dt) and x.shape == (5, 8)
    v = x.astype(np.float64).ravel()
    zeros = v[v == 0]
    assert (np.signbit(zeros) == 0).any() and np.signbit(zeros).any()  # +0 and -0
    assert np.isnan(v).any() and (v == np.inf).any() and (v == -np.inf).any()
    for want in (sub, -sub, tiny, -tiny, tiny - sub, big, -big, 1.0, -1.0):
        assert (v == want).any(), want
    # the rest are ordinary normal samples
    ordinary = v[np.isfinite(v) & (np.abs(v) > tiny) & (np.abs(v) < 10) & (np.abs(v) != 1)]
    assert len(ordinary) >= 15


@pytest.mark.parametrize("dt", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
                                np.uint32, np.uint64])
def test_make_inputs_int_full_range(dt):
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    x = make_inputs(graph_with(elem, [4, 10]))["x"]
    info = np.iinfo(dt)
    assert x.dtype == np.dtype(dt)
    assert (x == info.min).any() and (x == info.max).any() and (x == 0).any() and (x == 1).any()
    if info.min < 0:
        assert (x == -1).any()


def test_make_inputs_bool_both_values():
    x = make_inputs(graph_with(T.BOOL, [3]))["x"]
    assert x.dtype == np.bool_ and x.any() and not x.all()


def test_make_inputs_deterministic_and_seeded():
    g = graph_with(T.FLOAT, [6, 7])
    a, b = make_inputs(g, seed=3)["x"], make_inputs(g, seed=3)["x"]
    assert a.tobytes() == b.tobytes()
    c = make_inputs(g, seed=4)["x"]
    assert a.tobytes() != c.tobytes()


def test_make_inputs_dims_initializers_and_unknowns():
    x = helper.make_tensor_value_info("x", T.FLOAT, ["batch", 3, None])
    w = helper.make_tensor_value_info("w", T.FLOAT, [3])
    g = helper.make_graph([], "g", [x, w], [x],
                          initializer=[numpy_helper.from_array(np.ones(3, np.float32), "w")])
    feeds = make_inputs(g, dims={"batch": 7})
    assert list(feeds) == ["x"]  # the initializer-backed input is not generated
    assert feeds["x"].shape == (7, 3, DEFAULT_DIM)
    assert make_inputs(g)["x"].shape == (DEFAULT_DIM, 3, DEFAULT_DIM)
    no_shape = helper.make_graph([], "g", [helper.make_tensor_value_info("x", T.FLOAT, None)],
                                 [])
    with pytest.raises(OpshiftError, match="'x' declares no shape"):
        make_inputs(no_shape)
    with pytest.raises(OpshiftError, match="cannot generate values of type complex64"):
        make_inputs(graph_with(T.COMPLEX64, [2]))


def test_make_inputs_strings():
    """String inputs: lowercase words, half the elements special strings (empty, blanks,
    case, digits, non-ASCII, long); reproducible for a seed."""
    x = make_inputs(graph_with(T.STRING, [40]))["x"]
    assert x.dtype == object and x.shape == (40,)
    assert all(type(v) is str for v in x)
    specials = set(special_values(np.dtype(object)))
    assert {"", "ünïcödé ß 漢字", "x" * 64} <= specials
    assert len(specials & set(x)) >= 8
    assert all(w.isalpha() and w.islower() for v in x if v not in specials for w in v.split())
    assert x.tolist() == make_inputs(graph_with(T.STRING, [40]))["x"].tolist()
    assert x.tolist() != make_inputs(graph_with(T.STRING, [40]), seed=1)["x"].tolist()


def test_cli_strings_generated_or_from_npz(capsys, tmp_path):
    m = make_model([helper.make_node("CategoryMapper", ["x"], ["y"], domain="ai.onnx.ml",
                                     cats_strings=["a", "The Cat"], cats_int64s=[1, 2])],
                   [helper.make_tensor_value_info("x", T.STRING, [3])],
                   [helper.make_tensor_value_info("y", T.INT64, [3])], opset=13,
                   extra_opsets=[helper.make_opsetid("ai.onnx.ml", 1)])
    p = save(m, tmp_path / "m.onnx")
    rc, out, err = run_cli(capsys, p, p, "-v")
    assert rc == 0 and "generated inputs, seed 0, 1 round:\n  x: object [3]\n" in out, err
    for arr in (np.array(["The Cat", "a", "dog"]), np.array([b"The Cat", b"a", b"dog"])):
        np.savez(tmp_path / "s.npz", x=arr)  # numpy's own strings, unicode or bytes
        rc, out, err = run_cli(capsys, p, p, "--inputs", tmp_path / "s.npz", "-v")
        assert rc == 0 and "x: object [3]" in out, out + err


# ---------------------------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------------------------
def steps(x, n, dt):
    """x moved n representable values up, computed with integer bit arithmetic."""
    a = np.array([x], dtype=dt)
    ui = {2: np.uint16, 4: np.uint32, 8: np.uint64}[a.dtype.itemsize]
    return (a.view(ui) + ui(n)).view(dt)


@pytest.mark.parametrize("dt,tol", [(np.float64, 4), (np.float32, 4), (np.float16, 2),
                                    (BF16, 2)])
def test_compare_ulp_tolerance_per_dtype(dt, tol):
    one = np.array([1.5], dtype=dt)
    c = compare(one, steps(1.5, tol, dt))
    assert c.ok and c.max_ulp == tol
    c = compare(one, steps(1.5, tol + 1, dt))
    assert not c.ok and c.max_ulp == tol + 1 and "ulp" in c.reason


def test_compare_ulp_counts_across_zero():
    sub = np.array([2.0**-149], np.float32)
    c = compare(sub, -sub)
    assert c.ok and c.max_ulp == 2
    c = compare(np.array([3 * 2.0**-149], np.float32), np.array([-2 * 2.0**-149], np.float32))
    assert not c.ok and c.max_ulp == 5
    # opposite-sign extremes do not overflow the distance
    big = np.finfo(np.float64).max
    c = compare(np.array([big]), np.array([-big]))
    assert not c.ok and c.max_ulp == 2 * (0x7FEFFFFFFFFFFFFF)


def test_compare_nan_and_infinities():
    f = np.float32
    assert compare(np.array([np.nan, 1], f), np.array([-np.nan, 1], f)).ok
    c = compare(np.array([np.nan], f), np.array([1.0], f))
    assert not c.ok and "NaN vs number" in c.reason
    c = compare(np.array([1.0], f), np.array([np.nan], f))
    assert not c.ok
    assert compare(np.array([np.inf, -np.inf], f), np.array([np.inf, -np.inf], f)).ok
    c = compare(np.array([np.inf], f), np.array([-np.inf], f))
    assert not c.ok and "infinity" in c.reason
    # max is 1 ulp below inf in the bit pattern, but a finite value never matches infinity
    c = compare(np.array([np.inf], f), np.array([np.finfo(f).max], f))
    assert not c.ok and "infinity" in c.reason


@pytest.mark.parametrize("name", ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz"])
def test_compare_narrow_floats_exactly_nan_payloads_aside(name):
    dt = np.dtype(getattr(ml_dtypes, name))
    nan = np.array([np.nan], np.float32).astype(dt).view(np.uint8)[0]
    other_nan = nan ^ 0x80 if "fnuz" not in name else nan  # (fnuz: one NaN, 0x80)
    bits = np.array([nan, 0x01, 0x38], np.uint8)
    e = bits.view(dt)
    assert compare(e, np.array([other_nan, 0x01, 0x38], np.uint8).view(dt)).ok
    r = compare(e, np.array([nan, 0x02, 0x38], np.uint8).view(dt))
    assert not r.ok and r.reason.startswith("1 of 3 elements differ")
    assert not compare(e, np.array([nan, 0x01, 0x39], np.uint8).view(dt)).ok  # one step
    if "fnuz" not in name:
        zeros = np.array([0x00, 0x80], np.uint8).view(dt)
        assert not compare(zeros, zeros[::-1].copy()).ok  # -0 vs +0
        assert compare(zeros, zeros[::-1].copy(), signed_zeros=False).ok


def test_compare_signed_zero_policy():
    pz, nz = np.array([0.0], np.float32), np.array([-0.0], np.float32)
    c = compare(pz, nz)
    assert not c.ok and "-0.0 vs +0.0" in c.reason
    assert compare(nz, nz).ok
    assert compare(pz, nz, signed_zeros=False).ok


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.float16, BF16, np.int8,
                                np.uint64, np.bool_])
def test_compare_identical_bits_agrees_with_the_element_checks(dt):
    """Arrays with the same bits (NaN payloads, signs of zero, infinities, subnormals) are
    equal with max_abs 0 and max_ulp 0: the answer the element-by-element checks give."""
    from opshift.verify.comparison import compare_floats

    rng = np.random.default_rng(3)
    if np.dtype(dt).kind in "biu":
        a = rng.integers(0, 2, 64).astype(dt)
    else:
        a = rng.standard_normal(64).astype(np.float32).astype(dt)
        a[:8] = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45],
                         np.float32).astype(dt)
        bits = a.view(f"u{a.itemsize}")
        bits[8] = bits[4] | 1  # a NaN with another payload
        want = compare_floats(a, a.copy(), None, True)
        assert (want.ok, want.max_abs, want.max_ulp) == (True, 0.0, 0)
    for b in (a.copy(), a[::-1].copy()[::-1]):  # contiguous and not
        c = compare(a, b)
        assert (c.ok, c.max_abs, c.max_ulp, c.reason) == (True, 0.0, 0, "")
    if np.dtype(dt).kind == "f" or dt is BF16:
        b = a.copy()
        b[10] = -b[10]  # one element apart: the element checks find it
        c = compare(a, b)
        assert not c.ok and "[10]" in c.reason


def test_compare_ints_and_bool_exact():
    a = np.array([1, 2, 3], np.int32)
    assert compare(a, a.copy()).ok
    c = compare(a, np.array([1, 2, 4], np.int32))
    assert not c.ok and c.max_abs == 1 and "[2]" in c.reason
    i64 = np.iinfo(np.int64)
    c = compare(np.array([i64.min], np.int64), np.array([i64.max], np.int64))
    assert not c.ok and c.max_ulp == 2**64 - 1
    c = compare(np.array([0], np.uint64), np.array([2**64 - 1], np.uint64))
    assert c.max_ulp == 2**64 - 1
    assert compare(np.array([True, False]), np.array([True, False])).ok
    assert not compare(np.array([True, False]), np.array([True, True])).ok


def test_compare_dtype_and_shape_must_match():
    c = compare(np.zeros(3, np.float32), np.zeros(3, np.float64))
    assert not c.ok and "dtype" in c.reason
    c = compare(np.zeros(3, np.float32), np.zeros((3, 1), np.float32))
    assert not c.ok and "shape" in c.reason
    c = compare(np.zeros(3, np.int32), np.zeros(3, np.uint32))
    assert not c.ok


# ---------------------------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------------------------
def run_cli(capsys, *argv):
    rc = cli.main(["verify", *map(str, argv)])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture
def pair(tmp_path):
    ref = save(prelu_model(), tmp_path / "ref.onnx")
    cand = save(prelu_model(slope=(0.1, 0.2, 0.3)), tmp_path / "cand.onnx")
    changed = save(prelu_model(slope=(0.1, 0.2, 0.35)), tmp_path / "changed.onnx")
    return ref, cand, changed


def test_cli_pass_and_fail(capsys, pair):
    ref, cand, changed = pair
    rc, out, err = run_cli(capsys, ref, cand)
    assert rc == 0 and err == ""
    assert "pass" in out
    assert out.strip().splitlines()[-1] == "verify: ok: the whole model (1 output) matches"
    rc, out, err = run_cli(capsys, ref, changed)
    assert rc == 1 and "FAIL" in out
    rc, out, err = run_cli(capsys, ref, changed, "-q")
    assert rc == 1 and out == "" and err.startswith("FAIL")
    rc, out, err = run_cli(capsys, ref, cand, "-q")
    assert rc == 0 and out == "" and err == ""


def test_cli_json(capsys, pair):
    ref, _, changed = pair
    rc, out, _ = run_cli(capsys, ref, changed, "--json", "--dim", "N=3", "--seed", "5")
    d = json.loads(out)
    assert rc == 1 and d["ok"] is False and d["verify"]["seed"] == 5
    assert d["verify"]["inputs"]["x"]["shape"] == [3, 3, 2, 2]
    (row,) = d["verify"]["rows"]
    assert row["output"] == "y" and row["dtype"] == "float32" and row["ok"] is False
    assert row["max_ulp"] > 4


def test_cli_verbose_lists_inputs(capsys, pair):
    ref, cand, _ = pair
    rc, out, _ = run_cli(capsys, ref, cand, "-v")
    assert rc == 0 and "x: float32 [2, 3, 2, 2]" in out


def test_cli_npz_inputs(capsys, pair, tmp_path):
    ref, _, changed = pair
    x = np.full((1, 3, 2, 2), 2.0, np.float32)  # positive: the slopes do not matter
    np.savez(tmp_path / "pos.npz", **{"input:x": x, "output:y": x})
    rc, out, err = run_cli(capsys, ref, changed, "--inputs", tmp_path / "pos.npz")
    assert rc == 0, err
    np.savez(tmp_path / "neg.npz", x=-x)  # plain key; negative: the changed slope shows
    rc, out, err = run_cli(capsys, ref, changed, "--inputs", tmp_path / "neg.npz")
    assert rc == 1


def test_cli_npz_bfloat16_raw(capsys, tmp_path):
    m = save(leaky_model(0.5, elem=T.BFLOAT16, shape=(2, 3)), tmp_path / "b.onnx")
    x = np.array([[-1, 0, 1], [2, -2, np.nan]], np.float32).astype(BF16)
    np.savez(tmp_path / "b.npz", **{"input:x": x})  # numpy stores bfloat16 as V2
    rc, out, err = run_cli(capsys, m, m, "--inputs", tmp_path / "b.npz")
    assert rc == 0, err and "bfloat16" in out


def bad_cases(tmp_path, ref, cand):
    text = tmp_path / "text.onnx"
    text.write_text("hello, not a model\n")
    data = Path(ref).read_bytes()
    trunc = tmp_path / "trunc.onnx"
    trunc.write_bytes(data[: len(data) * 2 // 3])
    no_opset = prelu_model()
    del no_opset.opset_import[:]
    no_opset_p = save(no_opset, tmp_path / "noopset.onnx")
    x = np.zeros((2, 3, 2, 2), np.float32)
    npz = {}
    for key, arr in {"name": {"input:z": x}, "dtype": {"x": x.astype(np.float64)},
                     "rank": {"x": x[0]}, "dim": {"x": np.zeros((2, 4, 2, 2), np.float32)},
                     "missing": {"output:y": x}}.items():
        npz[key] = tmp_path / f"{key}.npz"
        np.savez(npz[key], **arr)
    npz_trunc = tmp_path / "trunc.npz"
    npz_trunc.write_bytes(npz["dim"].read_bytes()[:100])
    notnpz = tmp_path / "not.npz"
    notnpz.write_text("nope")
    np.save(tmp_path / "single.npy", x)
    custom = make_model([helper.make_node("Frob", ["x"], ["y"], name="frob", domain="acme")],
                        [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                        [helper.make_tensor_value_info("y", T.FLOAT, [2])], opset=16,
                        extra_opsets=[helper.make_opsetid("acme", 1)])
    custom_p = save(custom, tmp_path / "custom.onnx")
    return {
        "missing file": ([tmp_path / "nope.onnx", cand], "nope.onnx: no such file"),
        "directory": ([ref, tmp_path], "is a directory"),
        "not onnx": ([text, cand], "text.onnx: not an ONNX model"),
        "truncated": ([ref, trunc], "trunc.onnx"),
        "no opset import": ([no_opset_p, cand], "no opset import"),
        "input name": ([ref, cand, "--inputs", npz["name"]], "'z' is not an input"),
        "input dtype": ([ref, cand, "--inputs", npz["dtype"]], "dtype float64 given"),
        "input rank": ([ref, cand, "--inputs", npz["rank"]], "rank 3 given"),
        "input dim": ([ref, cand, "--inputs", npz["dim"]], "dim 1 is 4"),
        "npz missing": ([ref, cand, "--inputs", tmp_path / "gone.npz"], "gone.npz: no such"),
        "npz directory": ([ref, cand, "--inputs", tmp_path], "is a directory"),
        "npz not zip": ([ref, cand, "--inputs", notnpz], "not.npz: not an .npz archive"),
        "npy not npz": ([ref, cand, "--inputs", tmp_path / "single.npy"], "not an .npz"),
        "npz truncated": ([ref, cand, "--inputs", npz_trunc], "trunc.npz: cannot read"),
        "input missing": ([ref, cand, "--inputs", npz["missing"]], "'x' was not given"),
        "dim syntax": ([ref, cand, "--dim", "N"], "bad --dim 'N'"),
        "dim value": ([ref, cand, "--dim", "N=two"], "bad --dim 'N=two'"),
        "dim negative": ([ref, cand, "--dim", "N=-1"], "bad --dim"),
        "dim unknown": ([ref, cand, "--dim", "batch=4"], "--dim batch: no input"),
        "negative seed": ([ref, cand, "--seed", "-1"], "seed -1"),
        "dim with inputs": ([ref, cand, "--dim", "N=2", "--inputs", npz["rank"]], "--dim only"),
        "unsupported op": ([custom_p, custom_p], "node 'frob'"),
    }


def test_cli_bad_input_exit_2_one_line(capsys, pair, tmp_path):
    ref, cand, _ = pair
    cases = bad_cases(tmp_path, ref, cand)
    files = [p for p in tmp_path.iterdir() if p.is_file()]
    before = {p: digest(p) for p in files}
    for label, (argv, needle) in cases.items():
        rc, out, err = run_cli(capsys, *argv)
        assert rc == 2, (label, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1, (label, err)
        assert "Traceback" not in err
        assert lines[0].startswith("opshift verify: error: "), (label, err)
        assert needle in lines[0], (label, lines[0])
    assert {p: digest(p) for p in files} == before
    assert sorted(tmp_path.iterdir()) == sorted([*files])


def test_cli_evaluator_failure_names_node_and_file(capsys, pair, tmp_path):
    ref, _, _ = pair
    bad = save(prelu_model(slope=(0.1, 0.2, 0.3, 0.4, 0.5)), tmp_path / "bad.onnx")
    rc, _, err = run_cli(capsys, ref, bad)
    # the candidate failing where the reference runs computes something else: a mismatch
    assert rc == 1 and f"candidate {bad}: node 'prelu' (PRelu-9" in err
    assert err.rstrip().endswith("reference runs on the same inputs")


def test_cli_verbose_error_shows_traceback(capsys, tmp_path, pair):
    _, cand, _ = pair
    rc, _, err = run_cli(capsys, tmp_path / "nope.onnx", cand, "-v")
    assert rc == 2 and "Traceback" in err


def test_cli_subprocess_exit_codes_and_help(pair):
    ref, cand, changed = pair
    py = [sys.executable, "-m", "opshift", "verify"]
    r = subprocess.run([*py, ref, changed], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 1 and "FAIL" in r.stdout
    r = subprocess.run([*py, ref, "/nonexistent.onnx"], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "Traceback" not in r.stderr
    r = subprocess.run([*py, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "opshift verify model.onnx model9.onnx" in r.stdout


# ---------------------------------------------------------------------------------------------
# region_model, verify_rewrites, evaluator_supports
# ---------------------------------------------------------------------------------------------
def region(node, shape=(3, 4), opset=16, elem=T.FLOAT, initializers=()):
    x = helper.make_tensor_value_info("x", elem, list(shape))
    y = helper.make_tensor_value_info("y", elem, list(shape))
    return region_model([node], [x], [y], initializers, {"": opset})


def test_region_model_is_a_valid_model():
    m = region(helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.2), opset=9)
    onnx.checker.check_model(m, full_check=True)
    assert m.ir_version == helper.find_min_ir_version_for([helper.make_opsetid("", 9)])
    assert [(i.domain, i.version) for i in m.opset_import] == [("", 9)]
    with pytest.raises(OpshiftError, match="default domain"):
        region_model([], [], [], opset_imports={"acme": 1})
    # at opset 7 (IR 3), initializers that are not inputs take IR 4
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    m = region(helper.make_node("Add", ["x", "w"], ["y"]), opset=7, initializers=[w])
    onnx.checker.check_model(m, full_check=True)
    assert m.ir_version == 4


def test_region_model_copies_what_it_is_given():
    node = helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.2)
    m = region(node, opset=9)
    node.attribute[0].f = 0.5
    assert m.graph.node[0].attribute[0].f == pytest.approx(0.2)
    assert m.graph.name == "region" and m.producer_name == "opshift.verify"


@pytest.mark.parametrize("shape", [None, [], [2, 3], [1, "N", None]])
def test_value_info_is_the_tensor_type_it_names(shape):
    from opshift.verify.region import value_info

    vi = value_info("v", T.FLOAT16, shape)
    tt = vi.type.tensor_type
    assert vi.name == "v" and tt.elem_type == T.FLOAT16
    assert tt.HasField("shape") == (shape is not None)  # a scalar's rank 0 is known
    if shape is not None:
        assert [d.dim_value if d.HasField("dim_value") else d.dim_param or None
                for d in tt.shape.dim] == shape


def test_verify_rewrites_labels_rows_and_catches_differences():
    slope = numpy_helper.from_array(np.array([0.2], np.float32), "s")
    prelu = region(helper.make_node("PRelu", ["x", "s"], ["y"]), initializers=[slope])
    leaky = region(helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.2))
    leaky_wrong = region(helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.3))
    r = verify_rewrites([("prelu->leaky", prelu, leaky), ("bad", prelu, leaky_wrong)])
    assert [(row.label, row.output, row.ok) for row in r.rows] == [
        ("prelu->leaky", "y", True), ("bad", "y", False)]
    assert "bad" in r.table() and "rewrite" in r.table().splitlines()[0]
    assert not r.ok and r.failures[0].label == "bad"


def test_verify_rewrites_feeds_special_values_even_to_tiny_inputs():
    # LeakyRelu(alpha=0) and Selu(alpha=0, gamma=1) differ only in the sign of zero for
    # negative x, and at x = -inf (0 * -inf = NaN vs exp(-inf) = 0); a one-element input
    # holds one value per round, so this needs the extra rounds.
    leaky = region(helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.0), shape=(1,))
    selu = region(helper.make_node("Selu", ["x"], ["y"], alpha=0.0, gamma=1.0), shape=(1,))
    from opshift import evaluate

    with np.errstate(invalid="ignore"):
        at_minus_inf = evaluate(leaky, {"x": np.array([-np.inf], np.float32)})["y"]
    assert np.isnan(at_minus_inf).all()  # the difference the rounds must find
    r = verify_rewrites([("leaky->selu", leaky, selu)], signed_zeros=False)
    assert not r.ok and r.rounds > 1 and "NaN vs number" in r.rows[0].reason
    r = verify_rewrites([("leaky->selu", leaky, selu)])
    assert not r.ok


def _leaky_rewrite(i: int, alpha: float = 0.2, alpha_after: float = 0.2, name=None):
    """LeakyRelu(x_i) -> PRelu(x_i, constant alpha), values and nodes named per ``i``."""
    x = helper.make_tensor_value_info(f"x{i}", T.FLOAT, [3, 4])
    y = helper.make_tensor_value_info(f"y{i}", T.FLOAT, [3, 4])
    slope = numpy_helper.from_array(np.array([alpha_after], np.float32), f"s{i}")
    before = region_model([helper.make_node("LeakyRelu", [f"x{i}"], [f"y{i}"], alpha=alpha,
                                            name=name or f"n{i}")], [x], [y],
                          opset_imports={"": 16})
    after = region_model([helper.make_node("Constant", [], [f"s{i}"], value=slope),
                          helper.make_node("PRelu", [f"x{i}", f"s{i}"], [f"y{i}"])], [x], [y],
                         opset_imports={"": 16})
    return Rewrite(f"r{i}", before, after)


def test_check_rewrites_checks_identical_regions_once(monkeypatch):
    v = sys.modules["opshift.verify.verifier"]  # where check_rewrites runs the models
    runs: list[str] = []
    real = v._run
    monkeypatch.setattr(v, "_run", lambda proto, feeds, who: runs.append(who) or
                        real(proto, feeds, who))
    # five rewrites alike but for their value and node names, one with another constant
    rewrites = [_leaky_rewrite(i) for i in range(4)] + [_leaky_rewrite(4, alpha_after=0.3)]
    out = dict(check_rewrites(rewrites))
    assert sorted({w.split()[-1] for w in runs}) == ["r0", "r4"]  # one check per group
    assert [(r.label, r.output, r.ok) for i in range(5) for r in out[f"r{i}"].rows] == [
        ("r0", "y0", True), ("r1", "y1", True), ("r2", "y2", True), ("r3", "y3", True),
        ("r4", "y4", False)]
    assert list(out["r2"].inputs) == ["x2"]
    r = verify_rewrites([(rw.label, rw.before, rw.after) for rw in rewrites])
    assert not r.ok and [f.label for f in r.failures] == ["r4"]
    # an attribute differing in the node itself (alpha) is its own group, and is caught
    runs.clear()
    out = dict(check_rewrites([_leaky_rewrite(0), _leaky_rewrite(1, alpha=0.25)]))
    assert sorted({w.split()[-1] for w in runs}) == ["r0", "r1"]
    assert out["r0"].ok and not out["r1"].ok
    # names alone never make a region differ; shapes do
    a, b = _leaky_rewrite(0), _leaky_rewrite(1)
    assert region_key(a.before, {}) == region_key(b.before, {})
    b.before.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 5
    assert region_key(a.before, {}) != region_key(b.before, {})


def test_check_rewrites_gives_each_rewrite_of_a_group_its_own_error():
    frob = [region_model([helper.make_node("Frob", [f"x{i}"], [f"y{i}"], domain="acme")],
                         [helper.make_tensor_value_info(f"x{i}", T.FLOAT, [2])],
                         [helper.make_tensor_value_info(f"y{i}", T.FLOAT, [2])],
                         opset_imports={"": 16, "acme": 1}) for i in range(2)]
    out = dict(check_rewrites([Rewrite(f"r{i}", frob[i], frob[i]) for i in range(2)]))
    assert [type(e).__name__ for e in out.values()] == ["UnsupportedError"] * 2
    assert str(out["r1"]).startswith("cannot verify rewrite r1: before:")
    assert str(out["r1"]).endswith("(found checking the identical region of r0)")


def test_check_rewrites_names_each_region_without_a_kernel():
    # regions of one kind (ops, opsets) share a kernel table, unless it lacks a kernel: the
    # table names a node, and each region's error names its own
    def frob(i, width):
        return region_model([helper.make_node("Frob", ["x"], ["y"], name=f"f{i}",
                                              domain="acme")],
                            [helper.make_tensor_value_info("x", T.FLOAT, [width])],
                            [helper.make_tensor_value_info("y", T.FLOAT, [width])],
                            opset_imports={"": 16, "acme": 1})

    out = dict(check_rewrites([Rewrite(f"r{i}", frob(i, 2 + i), frob(i, 2 + i))
                               for i in range(2)]))
    assert "node 'f0'" in str(out["r0"]) and "node 'f1'" in str(out["r1"])
    assert "identical region" not in str(out["r1"])
    leaky = [_leaky_rewrite(i, alpha=0.1 * (i + 1)) for i in range(3)]
    reports = dict(check_rewrites(leaky))
    assert [r.kernels for r in reports.values()] == [
        {"LeakyRelu-16": "opshift", "Constant-13": "opshift", "PRelu-16": "opshift"}] * 3


def test_verify_rewrites_refuses_regions_the_evaluator_cannot_run():
    frob = region_model([helper.make_node("Frob", ["x"], ["y"], name="f", domain="acme")],
                        [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                        [helper.make_tensor_value_info("y", T.FLOAT, [2])],
                        opset_imports={"": 16, "acme": 1})
    with pytest.raises(OpshiftError, match=r"cannot verify rewrite r1: before: node 'f'"):
        verify_rewrites([("r1", frob, frob)])


def test_evaluator_supports():
    assert evaluator_supports(prelu_model()) is None
    body = helper.make_function("local", "Act", ["a"], ["b"],
                                [helper.make_node("Selu", ["a"], ["b"])],
                                [helper.make_opsetid("", 22)])
    ok = make_model([helper.make_node("Act", ["x"], ["y"], domain="local")],
                    [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                    [helper.make_tensor_value_info("y", T.FLOAT, [2])], opset=22,
                    functions=[body], extra_opsets=[helper.make_opsetid("local", 1)])
    assert evaluator_supports(ok) is None
    bad_body = helper.make_function("local", "Act", ["a"], ["b"],
                                    [helper.make_node("Frob", ["a"], ["b"], name="inner",
                                                      domain="acme")],
                                    [helper.make_opsetid("", 22), helper.make_opsetid("acme", 1)])
    bad = make_model([helper.make_node("Act", ["x"], ["y"], domain="local")],
                     [helper.make_tensor_value_info("x", T.FLOAT, [2])],
                     [helper.make_tensor_value_info("y", T.FLOAT, [2])], opset=22,
                     functions=[bad_body], extra_opsets=[helper.make_opsetid("local", 1)])
    why = evaluator_supports(bad)
    assert why is not None and "node 'inner'" in why and "Act" in why


def test_evaluator_supports_checks_the_version(monkeypatch):
    from opshift.evaluator import function_body, onnx_reference, registry

    table = dict(registry._REGISTRY[("", "PRelu")])
    del table[16]
    monkeypatch.setitem(registry._REGISTRY, ("", "PRelu"), table)
    assert evaluator_supports(prelu_model(opset=16)) is None  # its function body
    monkeypatch.setattr(function_body, "has_body", lambda domain, op, version: False)
    monkeypatch.setattr(onnx_reference, "available", lambda domain, op, version: False)
    assert evaluator_supports(prelu_model(opset=9)) is None
    why = evaluator_supports(prelu_model(opset=16))
    assert why is not None and "node 'prelu' (PRelu-16" in why
    assert "neither the opshift evaluator nor onnx.reference" in why


def test_compare_numpy_scalars_are_0d_tensors():
    assert compare(np.bool_(True), np.array(True)).ok
    c = compare(np.float32(1.0), np.float32(2.0))
    assert not c.ok and "first at []" in c.reason


def test_cli_npz_bfloat16_as_uint16_bits(capsys, tmp_path):
    m = save(leaky_model(0.5, elem=T.BFLOAT16, shape=(2, 3)), tmp_path / "b.onnx")
    x = np.array([[-1, 0, 1], [2, -2, 3]], np.float32).astype(BF16)
    np.savez(tmp_path / "b.npz", **{"input:x": x.view(np.uint16)})
    rc, out, err = run_cli(capsys, m, m, "--inputs", tmp_path / "b.npz", "--json")
    assert rc == 0, err
    assert json.loads(out)["verify"]["rows"][0]["dtype"] == "bfloat16"


BUNDLED = sorted((ROOT / "models").glob("*.onnx"))


@pytest.mark.skipif(not BUNDLED, reason="bundled models not generated yet")
@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_bundled_model_verifies_against_itself(path, capsys):
    rc, out, err = run_cli(capsys, path, path, "-q")
    assert (rc, err) == (0, "")
    npz = path.with_suffix(".npz")
    if npz.exists():
        rc, out, err = run_cli(capsys, path, path, "-q", "--inputs", npz)
        assert (rc, err) == (0, "")


@pytest.mark.parametrize("elem,shape", [(T.FLOAT, [1]), (T.FLOAT16, [3]), (T.INT8, [2]),
                                        (T.BFLOAT16, [2, 2])])
def test_rounds_feed_every_special_value(elem, shape):
    from opshift.verify.inputs import generate_round, input_specs, round_count, special_values

    specs = input_specs(graph_with(elem, shape), None)
    n = round_count(specs)
    seen = np.concatenate([generate_round(specs, 0, p)[specs[0].name].ravel()
                           for p in range(n)])
    want = special_values(specs[0].dtype)
    seen_bits = {v.tobytes() for v in seen}
    nan = [np.isnan(v.astype(np.float64)) for v in want] if want.dtype.kind != "i" else []
    for i, v in enumerate(want):
        if nan and nan[i]:
            assert np.isnan(seen.astype(np.float64)).any()
        else:
            assert v.tobytes() in seen_bits, v


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
def test_compare_ulp_matches_nextafter_walk(dt):
    rng = np.random.default_rng(1)
    start = np.concatenate([rng.normal(0, 1, 20), rng.normal(0, 1e4, 10), [0.0, -0.0]]
                           ).astype(dt)
    for k in range(7):
        b = start.copy()
        for _ in range(k):
            b = np.nextafter(b, dt(np.inf))
        c = compare(start, b, ulp=10, signed_zeros=False)
        assert c.ok and c.max_ulp == k, (k, c)


def test_report_json_is_strict_json_with_infinities():
    m = leaky_model(0.5, shape=(2,))
    r = verify(m, m, {"x": np.array([1.0, -1.0], np.float32)})
    r.rows[0].max_abs = r.rows[0].max_ulp = float("inf")
    d = json.loads(r.to_json(), parse_constant=lambda c: pytest.fail(f"non-JSON {c}"))
    assert d["rows"][0]["max_ulp"] == "inf"


def test_cli_model_error_with_npz_names_the_model_not_the_npz(capsys, tmp_path, pair):
    ref, _, _ = pair
    bad = save(prelu_model(slope=(0.1, 0.2, 0.3, 0.4, 0.5)), tmp_path / "bad.onnx")
    np.savez(tmp_path / "in.npz", x=np.ones((1, 3, 2, 2), np.float32))
    rc, _, err = run_cli(capsys, ref, bad, "--inputs", tmp_path / "in.npz")
    assert rc == 1 and err.startswith(f"opshift verify: error: candidate {bad}: node 'prelu'")


def test_opshift_verify_is_callable_after_importing_the_submodule():
    import opshift
    import opshift.verify  # noqa: F401  (sets the package attribute to the module)

    m = prelu_model()
    assert opshift.verify(m, m).ok
    assert isinstance(opshift.verify(m, m), opshift.VerifyReport)


def test_region_inputs_follow_the_structure_not_the_names():
    from opshift.verify.inputs import RegionInputs, input_specs

    def specs(*names, shape=(1, 4, 3, 3)):
        return input_specs(helper.make_graph(
            [], "g", [helper.make_tensor_value_info(n, T.FLOAT, list(shape)) for n in names],
            []), None)

    made = RegionInputs(seed=3)
    a, desc_a = made.rounds(specs("x1"), {"x1": 0, "y1": 1})
    b, desc_b = made.rounds(specs("x2"), {"x2": 0, "y2": 1})
    assert a[0]["x1"] is b[0]["x2"]  # made once, fed to both, read-only
    assert not a[0]["x1"].flags.writeable
    assert desc_a["x1"] == desc_b["x2"] == {"dtype": "float32", "shape": [1, 4, 3, 3],
                                            "source": "generated"}
    assert np.isnan(a[0]["x1"]).any() and np.isinf(a[0]["x1"]).any()  # special values in
    c, _ = made.rounds(specs("x1", "x3"), {"x1": 0, "x3": 1})  # another structure
    assert not np.array_equal(c[0]["x1"], c[0]["x3"], equal_nan=True)
    big = specs("z", shape=(300, 300))  # over the size kept: made again, the same values
    d1, _ = made.rounds(big, {"z": 0})
    d2, _ = made.rounds(big, {"z": 0})
    assert d1[0]["z"] is not d2[0]["z"]
    assert np.array_equal(d1[0]["z"], d2[0]["z"], equal_nan=True)
    assert not np.array_equal(RegionInputs(seed=4).rounds(specs("x1"), {"x1": 0})[0][0]["x1"],
                              a[0]["x1"], equal_nan=True)


def test_a_rewrite_failing_where_the_reference_runs_is_a_mismatch():
    """Given two models, a candidate the evaluator cannot run is bad input (exit 2); as a
    rewrite of the reference (every command's --verify) it computes something else there."""
    from opshift.errors import EvaluationError

    ref, bad = prelu_model(), prelu_model(slope=(0.1, 0.2, 0.3, 0.4, 0.5))
    with pytest.raises(EvaluationError, match=r"candidate: node 'prelu'") as e:
        verify(ref, bad)
    assert not isinstance(e.value, VerificationError)
    with pytest.raises(VerificationError, match=r"candidate: node 'prelu'.*reference runs on "
                                                r"the same inputs"):
        verify(ref, bad, rewritten=True)
    with pytest.raises(EvaluationError, match=r"reference: node 'prelu'"):
        verify(bad, ref, rewritten=True)  # the reference fails first: bad input


def test_the_onnxruntime_backend_runs_basic_graph_optimizations_only(monkeypatch):
    """The onnxruntime backend judges models on its kernels, not on the fusions its full
    optimization level picks per opset (which round differently): sessions are made at the
    basic level."""
    ort = pytest.importorskip("onnxruntime")
    from opshift.verify.runtimes import run

    seen = []

    class Session:
        def __init__(self, data, options, providers):
            seen.append(options.graph_optimization_level)

        def get_inputs(self):
            return []

        def run(self, names, feeds):
            return []

    monkeypatch.setattr(ort, "InferenceSession", Session)
    assert run("onnxruntime", onnx.ModelProto(), {}) == []
    assert seen == [ort.GraphOptimizationLevel.ORT_ENABLE_BASIC]
