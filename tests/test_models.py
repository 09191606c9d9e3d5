"""The bundled models in models/: valid, reproducible, covering, and evaluated correctly.

Expected outputs come from models/generate.py's own NumPy formulas, never from opshift.
Comparison: integers and bool exactly; floats with NaN equal to NaN (any sign/payload), and

* bit-exact (signed zeros and infinities included) for models without ``exp``: every other
  op in them is exact IEEE arithmetic (Conv/Gemm/MatMul/BatchNormalization are fed dyadic
  values whose partial sums are exact in float32, so the summation order cannot matter);
* at most ``EXP_ULPS`` units in the last place of ``max(|expected|, 1)`` for models with Selu,
  whose ``exp`` may differ in the last bit between libm/SIMD implementations and whose
  ``alpha * e^x - alpha`` cancels near 0 (hence the scale floor of 1).
"""

from __future__ import annotations

import importlib.util
import zipfile
from collections.abc import Iterator
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnx.defs
import pytest
from conftest import MODELS, run_onnxruntime
from onnx import helper

EXP_ULPS = 4
EXP_OPS = {"Selu", "Exp", "Elu"}
MAX_FOLDER_BYTES = 2 * 1024 * 1024
ACTIVATIONS = ("PRelu", "LeakyRelu", "Selu")

MODEL_PATHS = sorted(MODELS.glob("*.onnx"))
IDS = [p.stem for p in MODEL_PATHS]


def _load_generator():
    spec = importlib.util.spec_from_file_location("opshift_models_generate",
                                                  MODELS / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


generate = _load_generator()


# ----------------------------------------------------------------------------------------------
# helpers


def _declared(graph: onnx.GraphProto) -> dict[str, np.dtype]:
    return {v.name: np.dtype(helper.tensor_dtype_to_np_dtype(v.type.tensor_type.elem_type))
            for v in [*graph.input, *graph.output]}


def load_case(onnx_path: Path, model: onnx.ModelProto | None = None):
    """(model, inputs, expected outputs) with bfloat16 arrays viewed as the declared dtype."""
    model = model or onnx.load(onnx_path)
    types = _declared(model.graph)
    inputs, outputs = {}, {}
    with np.load(onnx_path.with_suffix(".npz"), allow_pickle=False) as data:
        for key in data.files:
            kind, name = key.split(":", 1)
            arr = data[key]
            if types[name] != arr.dtype:
                arr = arr.view(types[name])
            {"input": inputs, "output": outputs}[kind][name] = arr
    return model, inputs, outputs


def scopes(model: onnx.ModelProto) -> Iterator[tuple[onnx.NodeProto, dict[str, int], str]]:
    """Every node with the opset imports in force for it and where it lives."""
    model_opsets = {imp.domain or "": imp.version for imp in model.opset_import}

    def walk(nodes, opsets, where):
        for node in nodes:
            yield node, opsets, where
            for a in node.attribute:
                subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
                for sub in subs:
                    yield from walk(sub.node, opsets, f"{where}/{node.op_type}:{sub.name}")

    yield from walk(model.graph.node, model_opsets, "graph")
    for fn in model.functions:
        fn_opsets = {imp.domain or "": imp.version for imp in fn.opset_import}
        yield from walk(fn.node, fn_opsets, f"function:{fn.domain}.{fn.name}")


def schema_version(node: onnx.NodeProto, opsets: dict[str, int]) -> int | None:
    domain = node.domain or ""
    if domain not in ("", "ai.onnx"):
        return None
    return onnx.defs.get_schema(node.op_type, opsets[""], "").since_version


def uses_exp(model: onnx.ModelProto) -> bool:
    return any(n.op_type in EXP_OPS for n, _, _ in scopes(model))


def _ulp_of(scale: np.ndarray, dtype: np.dtype) -> np.ndarray:
    eps = float(ml_dtypes.finfo(dtype).eps) if dtype == ml_dtypes.bfloat16 \
        else float(np.finfo(dtype).eps)
    _, e = np.frexp(scale)
    return eps * np.ldexp(1.0, e - 1)


def assert_same(got, want: np.ndarray, *, ulps: int, what: str) -> None:
    assert isinstance(got, np.ndarray), f"{what}: got {type(got).__name__}, not an ndarray"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if want.dtype.kind in "biu":
        bad = np.flatnonzero(got != want)
        assert bad.size == 0, f"{what}: {bad.size} values differ, first at flat index " \
                              f"{bad[0]}: {got.flat[bad[0]]} != {want.flat[bad[0]]}"
        return
    g, w = got.astype(np.float64), want.astype(np.float64)
    gn, wn = np.isnan(g), np.isnan(w)
    assert np.array_equal(gn, wn), f"{what}: NaN at different positions " \
                                   f"(got {int(gn.sum())}, expected {int(wn.sum())})"
    g, w = g[~wn], w[~wn]
    if ulps == 0:
        ok = (g == w) & (np.signbit(g) == np.signbit(w))
    else:
        with np.errstate(invalid="ignore"):
            tol = ulps * _ulp_of(np.maximum(np.abs(w), 1.0), want.dtype)
            ok = (g == w) | (np.abs(g - w) <= tol)
    bad = np.flatnonzero(~ok)
    assert bad.size == 0, (f"{what}: {bad.size} values differ beyond {ulps} ULP, first "
                           f"{g[bad[0]]!r} != expected {w[bad[0]]!r}")


# ----------------------------------------------------------------------------------------------
# the folder


def test_every_model_has_its_npz_and_the_generator_writes_exactly_these():
    onnx_stems = {p.stem for p in MODELS.glob("*.onnx")}
    npz_stems = {p.stem for p in MODELS.glob("*.npz")}
    assert onnx_stems == npz_stems
    assert onnx_stems == set(generate.GENERATORS)
    assert "prelu6_conv_per_channel" in onnx_stems  # the README Quickstart uses it


def test_folder_is_under_2_mb():
    total = sum(p.stat().st_size for p in MODELS.rglob("*")
                if p.is_file() and "__pycache__" not in p.parts)
    assert total < MAX_FOLDER_BYTES, f"models/ holds {total} bytes"


def test_generator_is_deterministic_and_matches_the_committed_files(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    written_a = generate.generate(a)
    generate.generate(b)
    assert len(written_a) == 2 * len(generate.GENERATORS)
    for p in written_a:
        assert p.read_bytes() == (b / p.name).read_bytes(), f"{p.name} differs between runs"
    for p in written_a:
        if p.suffix == ".onnx":
            assert p.read_bytes() == (MODELS / p.name).read_bytes(), f"{p.name}: regenerate"
    # The committed .npz files hold the same arrays (compared as arrays, so a NumPy with
    # another .npy header layout still passes); only exp-derived outputs may differ, by the
    # last bit of another machine's exp.
    for name in generate.GENERATORS:
        model, ins, outs = load_case(MODELS / f"{name}.onnx")
        _, ins2, outs2 = load_case(a / f"{name}.onnx", model)
        assert ins.keys() == ins2.keys() and outs.keys() == outs2.keys(), name
        for k in ins:
            assert ins[k].dtype == ins2[k].dtype and ins[k].shape == ins2[k].shape, (name, k)
            assert ins[k].tobytes() == ins2[k].tobytes(), f"{name}: input {k} differs"
        for k in outs:
            assert_same(outs2[k], outs[k], ulps=EXP_ULPS if uses_exp(model) else 0,
                        what=f"{name}.npz {k} regenerated vs committed")


def test_npz_keys_are_inputs_and_outputs_of_the_graph():
    for path in MODEL_PATHS:
        model, inputs, outputs = load_case(path)
        init = {t.name for t in model.graph.initializer}
        assert set(inputs) == {v.name for v in model.graph.input if v.name not in init}, path
        assert set(outputs) == {v.name for v in model.graph.output}, path
        with zipfile.ZipFile(path.with_suffix(".npz")) as zf:
            assert all(i.compress_type == zipfile.ZIP_STORED for i in zf.infolist())


def test_selu_and_leakyrelu_constants_in_the_generator_are_the_schema_defaults():
    def default(op, version, name):
        return onnx.defs.get_schema(op, version, "").attributes[name].default_value.f

    assert default("Selu", 1, "alpha") == np.float32(generate.SELU1_ALPHA)
    assert default("Selu", 1, "gamma") == np.float32(generate.SELU1_GAMMA)
    for v in (6, 22):
        assert default("Selu", v, "alpha") == generate.SELU6_ALPHA
        assert default("Selu", v, "gamma") == generate.SELU6_GAMMA
    for v in (1, 6, 16):
        assert default("LeakyRelu", v, "alpha") == np.float32(generate.LEAKY_ALPHA)
    # The Selu-1 and Selu-6 defaults differ, so selu1_defaults/selu6 tell them apart.
    assert np.float32(generate.SELU1_ALPHA) != np.float32(generate.SELU6_ALPHA)


# ----------------------------------------------------------------------------------------------
# coverage of issue 2 section 2


def _activation_nodes():
    """(file, op, version, elem type of X or None, attribute names, where, node, model)."""
    out = []
    for path in MODEL_PATHS:
        model = onnx.load(path)
        inferred = onnx.shape_inference.infer_shapes(model)
        g = inferred.graph
        types = {v.name: v.type.tensor_type.elem_type
                 for v in [*g.input, *g.value_info, *g.output]}
        types.update({t.name: t.data_type for t in g.initializer})
        for node, opsets, where in scopes(model):
            if node.op_type in ACTIVATIONS and (node.domain or "") == "":
                out.append((path.stem, node.op_type, schema_version(node, opsets),
                            types.get(node.input[0]), {a.name for a in node.attribute},
                            where, node, model))
    return out


def test_every_activation_version_is_covered():
    required = {(s.name, s.since_version) for s in onnx.defs.get_all_schemas_with_history()
                if s.name in ACTIVATIONS and s.domain in ("", "ai.onnx")}
    assert len(required) >= 11
    covered = {(op, v) for _, op, v, *_ in _activation_nodes()}
    assert required <= covered, f"not covered: {sorted(required - covered)}"


def test_required_variants_are_present():
    nodes = _activation_nodes()
    T = onnx.TensorProto

    def has(pred) -> bool:
        return any(pred(*n) for n in nodes)

    assert has(lambda f, op, v, t, at, w, n, m: (op, v) == ("PRelu", 1)
               and "consumed_inputs" in at)
    assert has(lambda f, op, v, t, at, w, n, m: (op, v) == ("LeakyRelu", 1)
               and "consumed_inputs" in at)
    assert has(lambda f, op, v, t, at, w, n, m: (op, v) == ("PRelu", 9) and t == T.INT32)
    for op, v in (("PRelu", 16), ("LeakyRelu", 16), ("Selu", 22)):
        assert has(lambda f, o, vv, t, at, w, n, m, op=op, v=v: (o, vv) == (op, v)
                   and t == T.BFLOAT16), (op, v)
    assert has(lambda f, op, v, t, at, w, n, m: (op, v) == ("Selu", 1) and not at)
    assert has(lambda f, op, v, t, at, w, n, m: op == "LeakyRelu" and "alpha" not in at)
    assert has(lambda f, op, v, t, at, w, n, m: op == "LeakyRelu" and "alpha" in at)

    def per_channel_after_conv(f, op, v, t, at, w, n, m):
        if (op, v) != ("PRelu", 6):
            return False
        producers = {o: p for p in m.graph.node for o in p.output}
        slope = {i.name: i for i in m.graph.initializer}.get(n.input[1])
        return (producers.get(n.input[0]) is not None
                and producers[n.input[0]].op_type == "Conv"
                and slope is not None and len(slope.dims) == 1 and slope.dims[0] > 1)

    assert has(per_channel_after_conv)
    where = {w for *_, w, _, _ in nodes}
    assert any("/If:" in w and "/Loop:" in w for w in where), "ops inside If inside Loop"
    assert any(w.startswith("function:") for w in where), "ops in a model-local function"

    def slope_is_graph_input(f, op, v, t, at, w, n, m):
        inits = {i.name for i in m.graph.initializer}
        return op == "PRelu" and n.input[1] in {i.name for i in m.graph.input} - inits

    assert has(slope_is_graph_input)

    def symbolic(f, op, v, t, at, w, n, m):
        return any(d.dim_param for i in m.graph.input for d in i.type.tensor_type.shape.dim)

    assert has(symbolic)


# ----------------------------------------------------------------------------------------------
# per model


@pytest.mark.parametrize("path", MODEL_PATHS, ids=IDS)
def test_model_is_valid(path):
    model = onnx.load(path)
    onnx.checker.check_model(model, full_check=True)
    default = [i for i in model.opset_import if i.domain in ("", "ai.onnx")]
    assert len(default) == 1
    assert model.ir_version == helper.find_min_ir_version_for(default)
    assert model.doc_string and model.graph.name and model.producer_name
    assert all(n.name for n, _, _ in scopes(model))


@pytest.mark.parametrize("path", MODEL_PATHS, ids=IDS)
def test_opshift_evaluator_reproduces_the_expected_outputs(path):
    from opshift.evaluator import evaluate

    model, inputs, expected = load_case(path)
    ulps = EXP_ULPS if uses_exp(model) else 0
    with np.errstate(all="ignore"):
        got = evaluate(model, inputs)
    assert set(got) == set(expected)
    for name, want in expected.items():
        assert_same(got[name], want, ulps=ulps, what=f"{path.name} {name}")


@pytest.mark.parametrize("path", MODEL_PATHS, ids=IDS)
def test_onnxruntime_agrees_where_it_runs(path):
    model, inputs, expected = load_case(path)
    ulps = EXP_ULPS if uses_exp(model) else 0
    names = [o.name for o in model.graph.output]
    got = run_onnxruntime(model, inputs)
    for name, value in zip(names, got):
        assert_same(np.asarray(value), expected[name], ulps=ulps,
                    what=f"{path.name} {name} (onnxruntime)")


def test_readme_lists_every_model():
    text = (MODELS / "README.md").read_text()
    rows = {line.split("|")[1].strip().strip("`") for line in text.splitlines()
            if line.startswith("| `") and ".onnx" in line}
    assert rows == {p.name for p in MODEL_PATHS}
    assert "input:<name>" in text and "output:<name>" in text


EXACT_BY_CONSTRUCTION = {"Conv", "Gemm", "MatMul", "BatchNormalization"}


def _has_linear_ops(path: Path) -> bool:
    return any(n.op_type in EXACT_BY_CONSTRUCTION for n, _, _ in scopes(onnx.load(path)))


ELEMENTWISE_PATHS = [p for p in MODEL_PATHS if not _has_linear_ops(p)]


def test_conv_model_feeds_inf_and_nan_through_the_conv():
    _, inputs, outputs = load_case(MODELS / "prelu6_conv_per_channel.onnx")
    x, y = inputs["x"], outputs["y"]
    assert np.isposinf(x).any() and np.isneginf(x).any() and np.isnan(x).any()
    assert np.isposinf(y).any() and np.isneginf(y).any() and np.isnan(y).any()


@pytest.mark.parametrize("path", ELEMENTWISE_PATHS, ids=[p.stem for p in ELEMENTWISE_PATHS])
def test_inputs_carry_the_special_values_their_dtype_has(path):
    """Models without Conv/Gemm/MatMul/BatchNormalization (whose inputs are dyadic so their
    sums stay exact) get every special value of their dtype."""
    model, inputs, _ = load_case(path)
    for name, x in inputs.items():
        if x.dtype.kind in "iu":
            info = np.iinfo(x.dtype)
            assert x.min() == info.min and x.max() == info.max, name
            continue
        if name == "slope":  # a runtime slope is a parameter, not data
            continue
        f = x.astype(np.float64)
        fi = ml_dtypes.finfo(x.dtype) if x.dtype == ml_dtypes.bfloat16 else np.finfo(x.dtype)
        sub = float(fi.smallest_subnormal)
        present = {
            "+0": bool(np.any((f == 0) & ~np.signbit(f))),
            "-0": bool(np.any((f == 0) & np.signbit(f))),
            "+inf": bool(np.any(f == np.inf)), "-inf": bool(np.any(f == -np.inf)),
            "nan": bool(np.isnan(f).any()),
            "+subnormal": bool(np.any(f == sub)), "-subnormal": bool(np.any(f == -sub)),
            "+max": bool(np.any(f == float(fi.max))), "-max": bool(np.any(f == -float(fi.max))),
        }
        missing = [k for k, v in present.items() if not v]
        assert not missing, f"{path.name} input {name} lacks {missing}"
