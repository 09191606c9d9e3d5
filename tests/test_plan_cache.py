"""inline's on-disk plan cache: a plan read back gives byte for byte the output of one made
from its template, for every bundled model at every opset, and a damaged, foreign or full
file never changes an output."""

from __future__ import annotations

import contextlib
import marshal
import os
import shutil
import subprocess
import sys
import zlib

import onnx
import pytest
from conftest import MODELS, ROOT, bundled_at_every_opset

from opshift import plan_cache, schema_cache
from opshift.errors import ConversionError
from opshift.passes import decompose as dec
from opshift.passes.inline import inline_serialized

BUNDLED = sorted(p.stem for p in MODELS.glob("*.onnx"))


def _stored(f) -> dict:
    """The plans in the cache file ``f``, its checksum checked."""
    fmt, crc, payload = marshal.loads(f.read_bytes())
    assert fmt == plan_cache.FORMAT and zlib.crc32(payload) == crc
    return marshal.loads(payload)


def _store(f, plans, fmt: int = plan_cache.FORMAT, crc: int | None = None) -> None:
    payload = marshal.dumps(plans)
    f.write_bytes(marshal.dumps((fmt, zlib.crc32(payload) if crc is None else crc, payload)))


def _new_process(monkeypatch) -> None:
    """Forget every plan held in memory, as a new process starts."""
    monkeypatch.setattr(plan_cache, "_plans", None)
    monkeypatch.setattr(plan_cache, "_live", {})
    monkeypatch.setattr(plan_cache, "_dirty", False)
    monkeypatch.setattr(dec, "_KEYED_EMITTERS", {})


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("OPSHIFT_CACHE_DIR", str(d))
    _new_process(monkeypatch)
    return d


def _inline_everything(monkeypatch, fresh_each: bool) -> dict[tuple[str, int], bytes | str]:
    """Every bundled model at every opset with a band template (9..newest), inlined:
    (name, opset) -> output bytes, or the refusal's error type."""
    out: dict[tuple[str, int], bytes | str] = {}
    for name in BUNDLED:
        for opset, m in bundled_at_every_opset(name):
            if opset < 9:
                continue
            if fresh_each:
                _new_process(monkeypatch)
            c = onnx.ModelProto()
            c.CopyFrom(m)
            try:
                out[name, opset] = inline_serialized(c)[0]
            except ConversionError as e:
                out[name, opset] = type(e).__name__
    return out


def test_plans_read_back_give_the_same_models_as_plans_made_fresh(cache_dir, monkeypatch):
    """The key holds everything a plan depends on: with every plan of every bundled model at
    every opset in one shared file, each model still comes out as when its plans are made
    from its own nodes."""
    monkeypatch.setenv("OPSHIFT_CACHE_DIR", "off")
    reference = _inline_everything(monkeypatch, fresh_each=True)
    monkeypatch.setenv("OPSHIFT_CACHE_DIR", str(cache_dir))
    _new_process(monkeypatch)
    assert _inline_everything(monkeypatch, fresh_each=False) == reference  # shared in memory
    (f,) = cache_dir.glob("plans-*.marshal")
    stored = _stored(f)
    assert {k[0] for k in stored} == {dec.FUNCTION, dec.STATIC}
    assert sum(len(entry[4]) for entry in stored.values()) > 10  # formats went with them
    assert {k[1] for k in stored} == set(dec.OPS)

    made = []
    real = dec.band_template

    def counted(site):
        template = real(site)  # (refusals raise: they are never stored)
        made.append(site.node.op_type)
        return template

    monkeypatch.setattr(dec, "band_template", counted)
    _new_process(monkeypatch)
    assert _inline_everything(monkeypatch, fresh_each=False) == reference  # from the file
    assert made == []
    # the file was not rewritten: nothing new was made
    assert _stored(f) == stored


def test_every_stored_plan_is_what_its_template_gives(cache_dir, monkeypatch):
    for name in ("small_cnn", "selu22_bf16", "leakyrelu16_bf16", "prelu9_int32",
                 "control_flow"):
        for opset, m in bundled_at_every_opset(name):
            if opset >= 9:
                c = onnx.ModelProto()
                c.CopyFrom(m)
                with contextlib.suppress(ConversionError):  # (refusals store nothing)
                    inline_serialized(c)
    (f,) = cache_dir.glob("plans-*.marshal")
    stored = _stored(f)
    assert len(stored) >= 6
    for key, fields in stored.items():
        band, op, version, et, *attrs = key
        node = onnx.helper.make_node(op, ["x", "s"] if op == "PRelu" else ["x"], ["y"])
        for a_name, value, ref in attrs:
            a = node.attribute.add()
            a.name, a.type = a_name, onnx.AttributeProto.FLOAT
            if ref:
                a.ref_attr_name = ref
            else:
                a.f = value
        opset = 18 if band == dec.FUNCTION else 13
        plan = dec._plan(dec.band_template(dec.Site(node, version, opset, et)))
        assert fields[:4] == (plan.suffixes, plan.nodes, plan.consts, plan.uses_slope), key


def _small_cnn_out() -> bytes:
    m = onnx.load(MODELS / "small_cnn.onnx")
    return inline_serialized(m)[0]


def test_damaged_or_malformed_plans_are_made_again(cache_dir, monkeypatch):
    want = _small_cnn_out()
    (f,) = cache_dir.glob("plans-*.marshal")
    data, good = f.read_bytes(), _stored(f)
    flipped = bytearray(data)
    flipped[-3] ^= 0x10  # inside a plan: only the checksum can tell
    for damage in (b"", b"\x00garbage", data[:-7], bytes(flipped)):
        f.write_bytes(damage)
        _new_process(monkeypatch)
        assert _small_cnn_out() == want
        assert _stored(f) == good  # made again and rewritten
    _store(f, good, fmt=plan_cache.FORMAT + 1)
    _new_process(monkeypatch)
    assert _small_cnn_out() == want
    assert _stored(f) == good
    # one plan with a slot out of range, one of the wrong shape: each is made again
    broken = dict(good)
    k1, k2 = list(broken)[:2]
    suffixes, nodes, consts, uses_slope, formats = broken[k1]
    broken[k1] = (suffixes, ((*nodes[0], 999), *nodes[1:]), consts, uses_slope, formats)
    broken[k2] = ("not", "a", "plan")
    _store(f, broken)
    _new_process(monkeypatch)
    assert _small_cnn_out() == want
    assert _stored(f) == good


def test_a_full_cache_stores_no_more_plans(cache_dir, monkeypatch):
    monkeypatch.setattr(plan_cache, "MAX_PLANS", 1)
    monkeypatch.setattr(plan_cache, "MAX_STORED_FORMATS", 1)
    want = _small_cnn_out()  # PRelu, LeakyRelu and Selu: three plans, one stored
    (f,) = cache_dir.glob("plans-*.marshal")
    stored = _stored(f)
    assert len(stored) == 1 and sum(len(e[4]) for e in stored.values()) <= 1
    _new_process(monkeypatch)
    assert _small_cnn_out() == want


def test_another_build_of_the_code_reads_another_file(cache_dir, monkeypatch, tmp_path):
    """The file name follows decompose.py (the code that makes plans) and onnx."""
    here = plan_cache.cache_file()
    assert schema_cache.onnx_key() in here.name
    edited = tmp_path / "decompose.py"
    shutil.copy(dec.__file__, edited)
    os.utime(edited, ns=(0, 0))
    monkeypatch.setattr(dec, "__file__", str(edited))
    assert plan_cache.cache_file() not in (here, None)
    monkeypatch.setenv("OPSHIFT_CACHE_DIR", "off")
    assert plan_cache.cache_file() is None


# A process where no band template can be made.
NO_TEMPLATES = """
import sys
from opshift.passes import decompose
def boom(site):
    raise AssertionError("a template was made")
decompose.band_template = boom
from opshift.cli import main
sys.exit(main(["inline", %r, "-o", %r, "-q"]))
"""


def test_a_later_process_reads_the_plans_an_earlier_one_made(tmp_path):
    src = MODELS / "small_cnn.onnx"
    env = {**os.environ, "OPSHIFT_CACHE_DIR": str(tmp_path / "cache")}

    def run(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env=env, cwd=ROOT)

    first = run(NO_TEMPLATES % (str(src), str(tmp_path / "a.onnx")))
    assert first.returncode != 0 and "a template was made" in first.stderr
    made = run(f"from opshift.cli import main; main(['inline', {str(src)!r}, '-o', "
               f"{str(tmp_path / 'b.onnx')!r}, '-q'])")
    assert made.returncode == 0, made.stderr
    second = run(NO_TEMPLATES % (str(src), str(tmp_path / "c.onnx")))
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "c.onnx").read_bytes() == (tmp_path / "b.onnx").read_bytes()


def test_a_write_removes_the_oldest_files_of_its_kind(cache_dir, monkeypatch):
    """Upgrades and edits leave files for other keys behind: a write keeps the newest
    KEEP_FILES of its kind and touches nothing else."""
    cache_dir.mkdir(parents=True)
    old = []
    for k in range(10):
        f = cache_dir / f"plans-{plan_cache.FORMAT}-old-{k}.marshal"
        f.write_bytes(b"stale")
        os.utime(f, ns=(10**18 + k, 10**18 + k))
        old.append(f)
    others = [cache_dir / "schemas-2-some-build.marshal", cache_dir / "notes.txt"]
    for f in others:
        f.write_bytes(b"keep")
        os.utime(f, ns=(1, 1))
    _small_cnn_out()
    mine = plan_cache.cache_file()
    left = sorted(p.name for p in cache_dir.glob("plans-*"))
    assert mine.name in left and len(left) == schema_cache.KEEP_FILES
    assert sorted(left) == sorted([mine.name] + [f.name for f in old[1 - schema_cache.KEEP_FILES:]])
    assert all(f.exists() for f in others)
