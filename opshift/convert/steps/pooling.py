"""Pooling: LpPool/GlobalLpPool **2** (p float vs int), AveragePool **7**
(count_include_pad with padding), dilations of all ones (the default) at MaxPool **10**,
AveragePool **19**, LpPool **18**, ceil_mode at MaxPool/AveragePool **10** (written as extra
end padding below) and MaxPool/AveragePool/LpPool **22** (with ceil_mode a window starting in
the end padding is dropped only from 22: proved absent from the attributes, for every input
size, when ``stride + end pad <= dilated kernel extent``, else from static sizes).
"""

from __future__ import annotations

from dataclasses import dataclass

from opshift.convert.registry import at
from opshift.convert.step import Refuse, Step, text


@at(2, "LpPool", "GlobalLpPool")
def lp_p(st: Step) -> None:
    p = st.attr("p")
    if p is None:
        return
    if st.up:
        if float(p) != int(p):
            raise Refuse(f"p={p} is not an integer")
        st.set_attr("p", int(p))
    else:
        st.set_attr("p", float(p))


@at(7, "AveragePool")
def avgpool_count_include_pad(st: Step) -> None:
    if st.up or not st.attr("count_include_pad", 0):
        return
    pads = st.attr("pads", [])
    auto_pad = st.attr("auto_pad", b"NOTSET")
    if any(pads) or auto_pad not in (b"NOTSET", b"VALID", "NOTSET", "VALID"):
        raise Refuse("count_include_pad=1 with padding exists only from AveragePool-7")
    st.del_attr("count_include_pad")
    st.note("dropped count_include_pad=1: there is no padding")


@at(10, "MaxPool")
@at(19, "AveragePool")
@at(18, "LpPool")
def pool_dilations(st: Step) -> None:
    if st.up or not st.has_attr("dilations"):
        return
    d = st.attr("dilations")
    if any(v != 1 for v in d):
        raise Refuse(f"dilations={d} exist only from {st.op}-{st.hi}")
    st.del_attr("dilations")
    st.note("dropped dilations of all ones (the default)")


@at(22, "MaxPool", "AveragePool", "LpPool")
def pool_ceil_windows(st: Step) -> None:
    # From 22, with ceil_mode a last window that would start in the end padding is dropped;
    # before 22 the output size formula kept it. Exact when no window starts there.
    if not st.attr("ceil_mode", 0):
        return
    geo = _Geometry.of(st)
    if geo.auto in ("SAME_UPPER", "SAME_LOWER"):
        # pads total (ceil(in/s) - 1) * s + span - in <= span - 1: the end pads are shorter
        # than a window, so the last window (which ends at the padded end) starts inside
        return
    undecided = [i for i in range(geo.n) if not geo.no_window_in_end_pad(i)]
    if not undecided:
        return
    sizes = geo.static_sizes(st, undecided)
    if sizes is None:
        i = undecided[0]
        raise Refuse(f"with ceil_mode=1 a window may start in the end padding along spatial "
                     f"axis {i} (stride {geo.strides[i]} + end pad {geo.pe[i]} > window "
                     f"{geo.span(i)}) for some input sizes, and that size is not static: "
                     "such a window is kept before 22, dropped from 22")
    for i in undecided:
        if geo.last_start(i, sizes[i]) >= geo.pb[i] + sizes[i]:
            raise Refuse(f"with ceil_mode=1 the last window along spatial axis {i} starts in "
                         "the padding: kept before 22, dropped from 22")


@at(10, "MaxPool", "AveragePool")
def ceil_mode_as_end_pads(st: Step) -> None:
    # ceil_mode exists only from 10. Below, the same windows are written as floor-mode
    # windows over extra end padding (as PyTorch's opset-9 exports do). MaxPool ignores
    # padding; AveragePool with count_include_pad=0 counts neither padding nor the ceil
    # overhang; with count_include_pad=1 it counts padding but not the overhang, so only
    # needing no extra padding is exact there.
    if st.up or not st.attr("ceil_mode", 0):
        return
    geo = _Geometry.of(st)
    if geo.auto in ("SAME_UPPER", "SAME_LOWER"):
        st.del_attr("ceil_mode")
        st.note("dropped ceil_mode=1", f"with auto_pad={geo.auto} the output size is "
                "ceil(in / stride) in either mode")
        return
    strided = [i for i in range(geo.n) if geo.strides[i] != 1]
    sizes = geo.static_sizes(st, strided) if strided else {}
    if sizes is None:
        raise Refuse(f"ceil_mode=1 with strides {geo.strides} needs static spatial dims to "
                     f"be written as end padding ({st.op}-{st.dst} has no ceil_mode)")
    extra = [0] * geo.n
    for i in strided:
        size = sizes[i]
        if size + geo.pb[i] + geo.pe[i] < geo.span(i):
            raise Refuse(f"the window along spatial axis {i} is larger than the padded input")
        start = geo.last_start(i, size)
        if start >= geo.pb[i] + size:
            raise Refuse(f"with ceil_mode=1 the last window along spatial axis {i} starts in "
                         "the end padding (kept before 22, dropped by runtimes): no "
                         "floor-mode padding reads it the same")
        extra[i] = start + geo.span(i) - (geo.pb[i] + size + geo.pe[i])
    if not any(extra):
        st.del_attr("ceil_mode")
        st.note("dropped ceil_mode=1", "ceil and floor give the same windows here")
        return
    if geo.auto == "VALID":
        raise Refuse("ceil_mode=1 with auto_pad=VALID: the schema's formula gives floor's "
                     "windows, runtimes give ceil's; they differ here")
    if st.op == "AveragePool" and st.attr("count_include_pad", 0):
        raise Refuse("ceil_mode=1 with count_include_pad=1: the ceil overhang is not "
                     "counted, extra end padding would be")
    pads = geo.pb + [e + x for e, x in zip(geo.pe, extra)]
    st.del_attr("ceil_mode")
    st.set_attr("pads", pads)
    st.note(f"ceil_mode=1 written as end pads {pads}",
            f"{st.op}-{st.dst} has no ceil_mode; the same windows over extra end padding, "
            "which " + ("MaxPool never reads as a maximum" if st.op == "MaxPool" else
                        "count_include_pad=0 does not count"))


@dataclass(frozen=True)
class _Geometry:
    """A pooling node's windows per spatial axis (pads of auto_pad=VALID are zeros; with
    SAME_* the pads depend on the input size and are not read)."""

    auto: str
    n: int
    kernel: list[int]
    strides: list[int]
    dil: list[int]
    pb: list[int]
    pe: list[int]

    @staticmethod
    def of(st: Step) -> _Geometry:
        k = st.attr("kernel_shape")
        if not k:
            raise Refuse("kernel_shape is missing")
        n = len(k)
        auto = text(st.attr("auto_pad", b"NOTSET")) or "NOTSET"
        pads = list(st.attr("pads", [0] * (2 * n))) if auto == "NOTSET" else [0] * (2 * n)
        return _Geometry(auto, n, list(k), list(st.attr("strides", [1] * n)),
                         list(st.attr("dilations", [1] * n)), pads[:n], pads[n:])

    def span(self, i: int) -> int:
        return self.dil[i] * (self.kernel[i] - 1) + 1

    def no_window_in_end_pad(self, i: int) -> bool:
        # The last ceil-mode window starts at ceil(L / s) * s <= L + s - 1 (padded
        # coordinates, L = in + pb + pe - span), which is < pb + in for every input size
        # exactly when s + pe <= span (and some size reaches L + s - 1 otherwise).
        return self.strides[i] + self.pe[i] <= self.span(i)

    def last_start(self, i: int, size: int) -> int:
        """Where the last window of ceil mode (as before 22) starts, in padded coordinates."""
        s = self.strides[i]
        return -(-(size + self.pb[i] + self.pe[i] - self.span(i)) // s) * s

    def static_sizes(self, st: Step, axes: list[int]) -> dict[int, int] | None:
        """The static input sizes of spatial ``axes``, or None if one is not static."""
        shape = st.shape(st.input(0))
        if shape is None or len(shape) != self.n + 2:
            return None
        out = {}
        for i in axes:
            d = shape[2 + i]
            if not isinstance(d, int) or isinstance(d, bool):
                return None
            out[i] = d
        return out
