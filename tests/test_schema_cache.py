"""The on-disk schema facts say exactly what onnx.defs says, and spare the hot path onnx's
schema registry."""

from __future__ import annotations

import marshal
import os
import subprocess
import sys
import zlib

import onnx
import onnx.defs
import pytest
from conftest import MODELS, ROOT

from opshift import opsets, schema_cache

FACTS = schema_cache.build()
ALL_OPS = sorted({s.name for s in onnx.defs.get_all_schemas_with_history()
                  if s.domain in ("", "ai.onnx")})


def _get(op: str, opset: int):
    try:
        return onnx.defs.get_schema(op, opset, "")
    except onnx.defs.SchemaError:
        return None


@pytest.mark.parametrize("op", ALL_OPS)
def test_since_version_and_attribute_kinds_match_onnx_defs(op):
    seen = set()
    for opset in range(1, opsets.MAX_OPSET + 2):
        s = _get(op, opset)
        assert FACTS.since_version(op, opset) == (None if s is None else s.since_version)
        assert opsets.since_version(op, opset) == FACTS.since_version(op, opset)
        if s is not None:
            seen.add(s.since_version)
    assert opsets.versions(op) == tuple(sorted(seen))
    kinds = {a.type for v in FACTS.since[op] for a in _get(op, v).attributes.values()}
    graph = {onnx.defs.OpSchema.AttrType.GRAPH, onnx.defs.OpSchema.AttrType.GRAPHS}
    tensor = graph | {onnx.defs.OpSchema.AttrType.TENSOR, onnx.defs.OpSchema.AttrType.TENSORS,
                      onnx.defs.OpSchema.AttrType.SPARSE_TENSOR}
    assert opsets.has_graph_attribute(op) == bool(kinds & graph)
    assert opsets.may_hold_tensors(op) == bool(kinds & tensor)


@pytest.mark.parametrize("op", schema_cache.DEEP_OPS)
def test_activation_attributes_and_bodies_match_onnx_defs(op):
    for opset in range(1, opsets.MAX_OPSET + 1):
        s = _get(op, opset)
        if s is None:
            assert opsets.activation_attribute_types(op, opset) is None
            continue
        version, types = opsets.activation_attribute_types(op, opset)
        assert version == s.since_version
        assert types == {n: a.type.value for n, a in s.attributes.items()}
        want = {n: onnx.helper.get_attribute_value(a.default_value)
                for n, a in s.attributes.items()
                if a.default_value is not None and a.default_value.name}
        assert opsets.attribute_defaults(op, opset) == want
    s = onnx.defs.get_schema(op)
    assert FACTS.bodies[op] == s.get_function_with_opset_version(
        max(s.function_opset_versions))


def test_file_round_trip_is_exact():
    assert schema_cache._load(schema_cache._dump(FACTS)) == FACTS


def _run(code: str, cache: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OPSHIFT_CACHE_DIR": cache}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT)


# A process where every way into onnx's schema registry raises.
NO_REGISTRY = """
import sys
import onnx.defs
def boom(*a, **k):
    raise AssertionError("onnx's schema registry was built")
for name in ("get_schema", "get_all_schemas_with_history", "get_all_schemas", "has"):
    setattr(onnx.defs, name, boom)
from opshift.cli import main
sys.exit(main(["inline", sys.argv[1] if len(sys.argv) > 1 else %r, "-o", %r, "-q"]))
"""


@pytest.mark.parametrize("name", ["prelu16", "leakyrelu16_bf16", "selu22_bf16",
                                  "control_flow", "small_cnn", "prelu9_int32", "selu6", "prelu7"])
def test_cached_facts_keep_inline_off_the_registry(tmp_path, name):
    src, out = MODELS / f"{name}.onnx", tmp_path / "o.onnx"
    cache = tmp_path / "cache"
    code = NO_REGISTRY % (str(src), str(out))
    first = _run(code, str(cache))  # no file yet: the facts must come from the registry
    assert first.returncode != 0 and "registry was built" in first.stderr
    warm = _run("from opshift import schema_cache; schema_cache.facts()", str(cache))
    assert warm.returncode == 0, warm.stderr
    files = list(cache.glob("schemas-*.marshal"))
    assert len(files) == 1 and marshal.loads(files[0].read_bytes())[1] == schema_cache.onnx_key()
    second = _run(code, str(cache))
    assert second.returncode == 0, second.stderr
    onnx.checker.check_model(onnx.load(out), full_check=True)


def test_corrupt_foreign_or_unwritable_cache_is_ignored(tmp_path):
    cache = tmp_path / "cache"
    code = ("from opshift import schema_cache, opsets; schema_cache.facts(); "
            "print(opsets.since_version('PRelu', 8))")
    assert _run(code, str(cache)).stdout.strip() == "7"
    (f,) = cache.glob("schemas-*.marshal")
    data = f.read_bytes()
    flipped = bytearray(data)
    flipped[-20] ^= 0x01  # inside a function body: only the checksum can tell
    for damage in (b"", b"\x00not marshal", data[:-5], bytes(flipped)):
        f.write_bytes(damage)
        assert _run(code, str(cache)).stdout.strip() == "7"  # from onnx.defs, rewritten
        assert schema_cache._load(f.read_bytes()) == FACTS
    fmt, key, crc, payload = marshal.loads(f.read_bytes())
    wrong = marshal.dumps(({}, frozenset(), frozenset(), {}))
    for bad in ((fmt, "0.0.0-other-build", crc, payload), (fmt - 1, key, crc, payload),
                (fmt, key, zlib.crc32(wrong), wrong)):
        f.write_bytes(marshal.dumps(bad))
        assert schema_cache._load(f.read_bytes()) is None
    blocked = tmp_path / "file"
    blocked.write_text("")  # a file where the cache folder should be: nothing can be written
    r = _run(code, str(blocked / "sub"))
    assert r.returncode == 0 and r.stdout.strip() == "7"
    off = _run(code, "off")
    assert off.returncode == 0 and off.stdout.strip() == "7"
