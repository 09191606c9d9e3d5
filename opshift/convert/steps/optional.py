"""Optionals. From version 18 OptionalGetElement and OptionalHasElement also take a tensor or
a sequence (OptionalHasElement: or no input at all); before, only an optional. Going below
18, a node given a plain value becomes what the spec says it computes: OptionalGetElement of
a value is that value (an Identity), OptionalHasElement of one is true and of none false (a
constant). A node given an optional keeps its op."""

from __future__ import annotations

import numpy as np

from opshift import opsets
from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step


def _plain_type(st: Step, name: str) -> str | None:
    """The type of input ``name`` when it is a tensor or sequence (None: an optional)."""
    ts = st.facts.type_str(name)
    if ts is None:
        raise Refuse(f"the type of {name!r} is unknown (an optional keeps the op, a tensor "
                     "or sequence does not)")
    return None if ts.startswith("optional(") else ts


@at(18, "OptionalGetElement")
def get_element_of_a_value(st: Step) -> None:
    if st.up:
        return
    ts = _plain_type(st, st.input(0))
    if ts is None:
        return
    identity = opsets.since_version("Identity", st.target)
    if ts not in opsets.allowed_types("Identity", identity, param="V" if identity >= 14
                                      else "T"):
        raise Refuse(f"OptionalGetElement of a {ts} is that value, which Identity-{identity} "
                     "does not take")
    st.add_node("Identity", [st.input(0)], "element", output=st.w.output[0])
    st.remove(f"OptionalGetElement of a {ts} written as Identity (the value itself)")


@at(18, "OptionalHasElement")
def has_element_of_a_value(st: Step) -> None:
    if st.up:
        return
    given = st.input(0) if len(st.w.input) else ""
    if given and _plain_type(st, given) is None:
        return
    has = st.add_const("has_element", np.array(bool(given)))
    st.add_node("Identity", [has], "has_element", output=st.w.output[0])
    what = f"a {st.facts.type_str(given)}" if given else "no input"
    st.remove(f"OptionalHasElement of {what} written as the constant {bool(given)}")
