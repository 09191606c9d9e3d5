"""What a Selu pattern fuses to: Selu with alpha and gamma from its constants (or from the
function attributes they reference)."""

from __future__ import annotations

import onnx_ir as ir

from opshift.fuse.rules import checks as ck
from opshift.fuse.rules.checks import Plan, Refuse, no_expand, producers, x_dtype
from opshift.fuse.values import Const, Match, ref_attr, resolve, type_allowed


def _ref_attrs(values: list[ir.Value], what: str) -> tuple[ir.RefAttr, tuple] | None:
    refs = [ref_attr(v) for v in values]
    if all(r is None for r in refs):
        return None
    if any(r is None for r in refs) or len({r[0] for r in refs}) != 1:
        raise Refuse(f"the {what} operands are not all the same function attribute")
    nodes = tuple(n for r in refs for n in r[1])
    return ir.RefAttr(what, refs[0][0], ir.AttributeType.FLOAT), nodes


def _ref_selu(match: Match, x, opset, alphas, gammas, ra, rg, extra) -> Plan:
    """Selu whose alpha and/or gamma is a function attribute (values resolved per call)."""
    vals: dict = {}
    nodes: tuple = ()
    for name, r, vs in (("alpha", ra, alphas), ("gamma", rg, gammas)):
        if r is not None:
            vals[name], more = r
            nodes += more
        else:
            cs = [resolve(match, v) for v in vs]
            if any(c is None for c in cs):
                raise Refuse(f"{name} is not a constant")
            got = {ck.scalar_attr(c, x_dtype(match, x, c), name) for c in cs}
            if len(got) != 1:
                raise Refuse(f"the {name} operands differ")
            vals[name] = got.pop()
            nodes += producers(*cs)
    dtype = x_dtype(match, x)
    version, ok = type_allowed("Selu", opset, dtype)
    if not ok:
        raise Refuse(f"Selu-{version} at opset {opset} does not accept element type "
                     f"{dtype.name.lower()}")
    return Plan("Selu", x, attrs=vals, cleanup=extra + nodes,
                rounding=ck.per_step(dtype, "rounds alpha, gamma and every step"))


def selu_plan(match: Match, x: ir.Value, opset: int, alphas: list[ir.Value], gammas: list[ir.Value],
              extra: tuple[ir.Node, ...] = ()) -> Plan:
    """Selu for a pattern whose alpha (gamma) operands are ``alphas`` (``gammas``)."""
    seen: dict[int, Const | None] = {}  # the body uses AlphaCast / GammaCast twice each

    def once(v: ir.Value) -> Const | None:
        if id(v) not in seen:
            seen[id(v)] = resolve(match, v)
        return seen[id(v)]

    ac = [once(a) for a in alphas]
    gc = [once(g) for g in gammas]
    if any(c is None for c in ac + gc):
        # in a function body: Constant(value_float=@attr), no constant (a constant is no
        # attribute reference, so this is looked for only when some operand is not one)
        ra, rg = _ref_attrs(alphas, "alpha"), _ref_attrs(gammas, "gamma")
        if ra is not None or rg is not None:
            return _ref_selu(match, x, opset, alphas, gammas, ra, rg, extra)
    if any(c is None for c in ac):
        raise Refuse("alpha is not a constant")
    if any(c is None for c in gc):
        raise Refuse("gamma is not a constant")
    dtype = x_dtype(match, x, *ac, *gc)
    vals = {}
    for name, cs in (("alpha", ac), ("gamma", gc)):
        cs = list({id(c): c for c in cs}.values())
        attrs = [ck.scalar_attr(c, dtype, name) for c in cs]
        for c in cs:
            no_expand(match, c.shape, x, name)
        if len({a for a in attrs}) != 1:
            raise Refuse(f"the {name} operands differ ({', '.join(map(str, attrs))})")
        vals[name] = attrs[0]
    version, ok = type_allowed("Selu", opset, dtype)
    if not ok:
        raise Refuse(f"Selu-{version} at opset {opset} does not accept element type "
                     f"{dtype.name.lower()}")
    return Plan("Selu", x, attrs=vals, cleanup=extra + producers(*ac, *gc),
                rounding=ck.per_step(dtype, "rounds every step"))
