"""``opshift ops``: the version table against the conversion registries it is read from."""

from __future__ import annotations

import json
import re

import pytest
from conftest import table_cells

from opshift import opsets
from opshift.cli import main, output
from opshift.convert import registry
from opshift.convert.generic import schema_step
from opshift.convert.registry import replacement_for, steps_for


def run(capsys, *argv):
    rc = main(["ops", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.fixture(scope="module")
def registered() -> dict[tuple[str, int], list[str]]:
    """(op, version) -> names of the step functions the registry holds (all loaded)."""
    steps_for("PRelu", 7)
    return {k: [r.fn.__name__ for r in v] for k, v in registry.STEPS.items()}


def rows_of(out: str) -> dict[str, list[str]]:
    """op -> [op, versions, evaluator, convert] of the default-domain table."""
    return {k: v for k, v in table_cells(out.splitlines()).items() if opsets.versions(k)}


def _items(cell: str) -> dict[str, str]:
    """A convert cell as {'7': 'slope_rule', '<15': 'castlike_as_cast', ...}."""
    items = {}
    for item in cell.split("; "):
        version, _, what = item.partition(": ")
        items[version] = what
    return items


def test_every_registered_step_appears_at_its_version(capsys, registered):
    rc, out, _ = run(capsys)
    assert rc == 0
    rows = rows_of(out)
    for (op, v), names in registered.items():
        assert v in opsets.versions(op), f"{op}: a step registered at {v}, not a version"
        what = _items(rows[op][3]).get(str(v), "")
        for name in names:
            assert name in what.replace(" ", ""), (op, v, rows[op][3])
    # and nothing else: every "V: ..." item names registered steps or schema refusals
    for op, cells in rows.items():
        for version, what in _items(cells[3]).items():
            if version.isdigit():
                words = [w for w in re.split(r", | \(refused\)", what) if w]
                fns = registered.get((op, int(version)), [])
                assert all(w in fns or w.startswith("refused ") for w in words), (op, what)


def test_an_op_with_only_schema_steps_says_so(capsys, registered):
    rc, out, _ = run(capsys)
    rows = rows_of(out)
    with_steps = {op for op, _ in registered}
    only_schema = [op for op in rows if op not in with_steps and opsets.versions(op)[0] == 1
                   and not any(schema_step(op, a, b).refused or schema_step(op, b, a).refused
                               for a, b in zip(opsets.versions(op), opsets.versions(op)[1:]))]
    assert "Abs" in only_schema and "Relu" in only_schema
    for op in only_schema:
        assert rows[op][3] == "schema", op
    for op in with_steps:
        assert rows[op][3] != "schema", op


def test_prelu_shows_its_registered_steps(capsys):
    rc, out, _ = run(capsys, "PRelu")
    assert rc == 0
    items = _items(rows_of(out)["PRelu"][3])
    assert items == {"7": "slope_rule", "9": "integer_types", "16": "compute_wider"}
    rc, out, _ = run(capsys, "PRelu", "--all")
    rows = [line for line in out.splitlines() if "6 -> 7" in line]
    assert len(rows) == 1 and "slope_rule (prelu)" in rows[0]
    down = [line for line in out.splitlines() if "7 -> 9" in line][0]
    fewer = len(schema_step("PRelu", 9, 7).narrowed)
    assert fewer and down.rstrip().endswith(f"checks types ({fewer} fewer)")


def test_refusals_are_marked(capsys, registered):
    rc, out, _ = run(capsys)
    rows = rows_of(out)
    refusing = [(op, v, r.fn.__name__) for (op, v), rs in registry.STEPS.items() for r in rs
                if r.fn.__module__.endswith(".steps.refused")]
    assert ("Pad", 19, "pad_wrap") in refusing
    for op, v, name in refusing:
        assert f"{name} (refused)" in _items(rows[op][3])[str(v)], (op, v)
    # boundaries the schemas refuse (a deprecated version), going up or down, but where a
    # registered step replaces every node going up (a deprecated op becomes its successor)
    seen = 0
    for op in rows:
        vs = opsets.versions(op)
        for lo, hi in zip(vs, vs[1:]):
            replaced = any(r.replaces_up for r in registry.steps_for(op, hi))
            ways = [w for w, (a, b) in (("up", (lo, hi)), ("down", (hi, lo)))
                    if schema_step(op, a, b).refused and not (w == "up" and replaced)]
            if ways:
                seen += 1
                assert f"refused {'/'.join(ways)}" in _items(rows[op][3])[str(hi)], (op, hi)
            elif replaced:
                assert "refused" not in _items(rows[op][3])[str(hi)], (op, hi)
    assert seen >= 1  # GroupNormalization-18 is deprecated
    assert _items(rows["Upsample"][3])["10"] == "as_successor"
    assert _items(rows["Scatter"][3])["11"] == "as_successor"


def test_below_the_first_version(capsys):
    rc, out, _ = run(capsys, "CastLike", "HardSwish", "Acos", "Abs")
    rows = rows_of(out)
    assert replacement_for("CastLike") is not None
    assert _items(rows["CastLike"][3])["<15"] == replacement_for("CastLike").__name__
    assert opsets.schema("HardSwish", 14).function_opset_versions
    assert _items(rows["HardSwish"][3]) == {"<14": "function body"}
    assert _items(rows["Acos"][3]) == {"<7": "refused"}
    assert not any(k.startswith("<") for k in _items(rows["Abs"][3]))


def test_json_holds_every_boundary(capsys, registered):
    rc, out, _ = run(capsys, "--json")
    assert rc == 0
    d = json.loads(out)
    entries = {(e["domain"], e["op"]): e for e in d["details"]["ops"]}
    for (domain, op), e in entries.items():
        if domain != "ai.onnx":
            assert e["convert"] is None
            continue
        vs = opsets.versions(op)
        steps = e["convert"]["steps"]
        assert [(s["from"], s["to"]) for s in steps] == list(zip(vs, vs[1:]))
        for s in steps:
            assert [f["name"] for f in s["functions"]] == registered.get((op, s["to"]), [])
            assert s["schema_up"]["refused"] == schema_step(op, s["from"], s["to"]).refused
            assert s["schema_down"]["refused"] == schema_step(op, s["to"], s["from"]).refused
    prelu = {s["to"]: s for s in entries["ai.onnx", "PRelu"]["convert"]["steps"]}
    (slope_rule,) = [r.fn for r in steps_for("PRelu", 7)]
    doc = (slope_rule.__doc__ or "").strip().splitlines()
    assert prelu[7]["functions"] == [{"name": "slope_rule", "module": "prelu",
                                      "doc": doc[0] if doc else "", "when": "",
                                      "refusal": False}]
    assert prelu[9]["functions"][0]["when"] == "dropped_types_possible"
    assert prelu[7]["schema_up"]["relabel"] and not prelu[9]["schema_down"]["relabel"]
    assert entries["ai.onnx", "PRelu"]["convert"]["below"] is None
    assert entries["ai.onnx", "Acos"]["convert"]["below"] == "refused"
    # every key of the convert objects is documented with the --json schema
    c = entries["ai.onnx", "PRelu"]["convert"]
    keys = {*c, *c["steps"][0], *c["steps"][0]["schema_up"], *prelu[7]["functions"][0]}
    assert all(f"``{k}``" in output.__doc__ for k in keys), keys


def test_op_names_select_rows_and_unknown_is_an_error(capsys):
    rc, out, _ = run(capsys, "Selu", "ai.onnx.ml::Binarizer")
    assert rc == 0
    assert [line.split()[0] for line in out.splitlines() if line[:1].strip()] == [
        "op", "Selu", "2", "outside", "op", "ai.onnx.ml::Binarizer", "2"]
    rc, out, err = run(capsys, "NoSuchOp")
    assert rc == 2 and out == "" and err.count("\n") == 1 and "'NoSuchOp'" in err
