"""The models the bench scripts time, built with onnx alone (never with opshift, so that two
trees are timed on the same files).

Every model is a chain of blocks ``Conv(1x1, own weights and bias) -> Add(residual) ->
activation`` on ``float32 [1, 4, 3, 3]`` (C = 4 channels, the last axis 3, so a 1-D slope
``[C]`` fits axis 1 only), as legacy CNN exporters wrote them:

* value_info for every intermediate tensor (exporters write it);
* at opset <= 9 every initializer is also listed as a graph input (IR 3 requires it, and the
  exporters of opsets 7..9 kept doing it), ``ir_version`` the opset's (3 at opset <= 7);
* the PRelu slope per channel: ``[C]`` at opset <= 6 (the legacy per-channel broadcast),
  ``[C, 1, 1]`` from opset 7, or ``[C]`` at opset >= 7 with ``slope_defect`` (the defect
  ``opshift fix`` repairs: read per channel by legacy exporters, per last axis by ONNX);
* slopes ``shared`` (one initializer for every PRelu), ``every4`` (every 4th PRelu has its
  own slope, the others share one) or ``distinct`` (one per PRelu);
* activations ``prelu`` (PRelu only) or ``mixed`` (PRelu, LeakyRelu, Selu in turn);
* ``decomposed``: every activation replaced by its ONNX function body (opset >= 16 for
  PRelu and LeakyRelu, 18 for Selu's), names prefixed per node -- the form ``opshift inline``
  writes and ``opshift fuse`` reads.

``nodes`` is the node count aimed at; the model has the whole blocks that fit (at least one).

Command line (used by the bench scripts, which never import onnx themselves: see
_harness.py)::

    python bench/models.py build SPEC_JSON OUT.onnx   # write the model of a Spec
    python bench/models.py describe FILE.onnx         # print {"nodes", "opset", "ops"}
    python bench/models.py external DIR GIB           # model.onnx + weights.bin of GIB GiB
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections import Counter
from pathlib import Path

C, H, W = 4, 3, 3
SHAPE = [1, C, H, W]
ACTS = {"prelu": ("PRelu",), "mixed": ("PRelu", "LeakyRelu", "Selu")}
#: nodes per activation's ONNX function body
BODY_NODES = {"PRelu": 5, "LeakyRelu": 7, "Selu": 13}


@dataclasses.dataclass(frozen=True)
class Spec:
    """What to build (see the module docstring)."""

    nodes: int
    opset: int
    acts: str = "prelu"
    slopes: str = "shared"
    slope_defect: bool = False
    decomposed: bool = False
    weights_as_inputs: bool | None = None  # None: at opset <= 9

    def name(self) -> str:
        """A file name that says what the model is."""
        parts = [f"n{self.nodes}", f"op{self.opset}", self.acts, self.slopes]
        if self.slope_defect:
            parts.append("defect")
        if self.decomposed:
            parts.append("decomposed")
        if self.weights_as_inputs is not None:
            parts.append("winputs" if self.weights_as_inputs else "nowinputs")
        return "_".join(parts) + ".onnx"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    def nodes_per_block(self) -> float:
        acts = ACTS[self.acts]
        if not self.decomposed:
            return 3.0
        return 2 + sum(BODY_NODES[a] for a in acts) / len(acts)


def ir_version(opset: int) -> int:
    """The IR version onnx released with ``opset`` (3 up to opset 7)."""
    from onnx import helper

    for ir, op in ((3, 7), (4, 9), (5, 10), (6, 11), (7, 14), (8, 18), (9, 20)):
        if opset <= op:
            return ir
    return helper.VERSION_TABLE[-1][2]


def build(spec: Spec):
    """The ModelProto of ``spec``."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper

    acts = ACTS[spec.acts]
    blocks = max(1, round(spec.nodes / spec.nodes_per_block()))
    as_inputs = spec.opset <= 9 if spec.weights_as_inputs is None else spec.weights_as_inputs
    rng = np.random.default_rng(0)
    nodes, inits, infos = [], [], []
    bodies = _bodies(spec.opset) if spec.decomposed else {}

    def init(name: str, arr) -> str:
        inits.append(helper.make_tensor(name, TensorProto.FLOAT, arr.shape,
                                        arr.astype(np.float32).tobytes(), raw=True))
        return name

    def info(name: str, dtype=TensorProto.FLOAT, shape=SHAPE) -> None:
        infos.append(helper.make_tensor_value_info(name, dtype, shape))

    slope_shape = (C,) if spec.opset <= 6 or spec.slope_defect else (C, 1, 1)
    shared = init("slope", np.linspace(0.05, 0.25, C).reshape(slope_shape))
    cur = "x"
    n_prelu = 0
    for i in range(blocks):
        w = init(f"W{i}", rng.uniform(-0.6, 0.6, (C, C, 1, 1)))
        b = init(f"B{i}", rng.uniform(-0.1, 0.1, (C,)))
        nodes.append(helper.make_node("Conv", [cur, w, b], [f"conv{i}"], name=f"Conv_{i}",
                                      kernel_shape=[1, 1]))
        nodes.append(helper.make_node("Add", [f"conv{i}", cur], [f"add{i}"], name=f"Add_{i}"))
        info(f"conv{i}")
        info(f"add{i}")
        op = acts[i % len(acts)]
        out = f"act{i}"
        inputs, attrs = [f"add{i}"], {}
        if op == "PRelu":
            own = spec.slopes == "distinct" or (spec.slopes == "every4" and n_prelu % 4 == 0)
            slope = (init(f"slope{i}", rng.uniform(0.05, 0.3, slope_shape)) if own
                     else shared)
            inputs.append(slope)
            n_prelu += 1
        elif op == "LeakyRelu":
            attrs["alpha"] = 0.1
        if spec.decomposed:
            nodes += _expand(bodies[op], inputs, out, attrs, f"{op}_{i}_", infos)
        else:
            nodes.append(helper.make_node(op, inputs, [out], name=f"{op}_{i}", **attrs))
        info(out)
        cur = out
    infos.pop()  # the last activation's output is the graph output
    used = {n for node in nodes for n in node.input}
    inits = [t for t in inits if t.name in used]
    graph_inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)]
    if as_inputs:
        graph_inputs += [helper.make_tensor_value_info(t.name, TensorProto.FLOAT, t.dims)
                         for t in inits]
    graph = helper.make_graph(nodes, "bench", graph_inputs,
                              [helper.make_tensor_value_info(cur, TensorProto.FLOAT, SHAPE)],
                              inits, value_info=infos)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", spec.opset)],
                              producer_name="opshift-bench")
    model.ir_version = ir_version(spec.opset)
    onnx.checker.check_model(model)
    return model


def _bodies(opset: int) -> dict:
    """Each activation's ONNX function body in force at ``opset``."""
    import onnx
    from onnx import defs

    out = {}
    for op in ("PRelu", "LeakyRelu", "Selu"):
        schema = defs.get_schema(op, opset)
        versions = [v for v in schema.function_opset_versions if v <= opset]
        if not versions:
            raise SystemExit(f"{op}-{schema.since_version} has no function body at opset "
                             f"{opset}")
        out[op] = (schema, onnx.FunctionProto.FromString(
            schema.get_function_with_opset_version(max(versions))))
    return out


def _expand(body, inputs: list[str], output: str, attrs: dict, prefix: str, infos) -> list:
    """The nodes of a function body called on ``inputs``, writing ``output``."""
    from onnx import TensorProto, helper

    schema, fn = body
    values = {a.name: a.default_value for a in schema.attributes.values()}
    values.update({k: helper.make_attribute(k, v) for k, v in attrs.items()})
    rename = dict(zip(fn.input, inputs))
    rename[fn.output[0]] = output
    out = []
    for node in fn.node:
        new = helper.make_node(node.op_type, [rename.get(n, prefix + n) for n in node.input],
                               [rename.get(n, prefix + n) for n in node.output],
                               name=prefix + (node.output[0]))
        for a in node.attribute:
            if a.ref_attr_name:
                ref = values[a.ref_attr_name]
                a2 = type(a)()
                a2.CopyFrom(ref)
                a2.name = a.name
                new.attribute.append(a2)
            else:
                new.attribute.append(a)
        out.append(new)
        for n in node.output:
            if n == fn.output[0]:
                continue
            if node.op_type == "Constant":
                infos.append(helper.make_tensor_value_info(prefix + n, TensorProto.FLOAT, []))
            elif node.op_type == "Less":
                infos.append(helper.make_tensor_value_info(prefix + n, TensorProto.BOOL,
                                                           SHAPE))
            else:
                shape = [] if n.endswith("Cast") else SHAPE
                infos.append(helper.make_tensor_value_info(prefix + n, TensorProto.FLOAT,
                                                           shape))
    return out


def build_external(folder: Path, gib: float) -> Path:
    """``folder/model.onnx``: an opset-6, IR-3 Conv -> PRelu (per-channel slope) ->
    LeakyRelu -> Selu model, plus three Identity outputs of big weights kept in
    ``folder/weights.bin`` (``gib`` GiB, written in 64 MiB chunks, never held whole)."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    chunk = 64 << 20
    n_tensors = 3
    per = int(gib * (1 << 30)) // n_tensors // 4  # float32 elements per big tensor
    rng = np.random.default_rng(0)
    block = rng.standard_normal(chunk // 4).astype(np.float32).tobytes()
    inits = []
    offset = 0
    with open(folder / "weights.bin", "wb") as f:
        for i in range(n_tensors):
            length = per * 4
            left = length
            while left:
                k = min(left, len(block))
                f.write(block[:k])
                left -= k
            t = TensorProto(name=f"big{i}", data_type=TensorProto.FLOAT, dims=[per])
            t.data_location = TensorProto.EXTERNAL
            for key, val in (("location", "weights.bin"), ("offset", str(offset)),
                             ("length", str(length))):
                e = t.external_data.add()
                e.key, e.value = key, val
            inits.append(t)
            offset += length
    c = 8
    w = numpy_helper.from_array(rng.standard_normal((c, 3, 3, 3)).astype(np.float32), "W")
    s = numpy_helper.from_array(np.linspace(0.1, 0.8, c, dtype=np.float32), "slope")
    nodes = [helper.make_node("Conv", ["x", "W"], ["conv"], name="conv", pads=[1, 1, 1, 1]),
             helper.make_node("PRelu", ["conv", "slope"], ["p"], name="prelu"),
             helper.make_node("LeakyRelu", ["p"], ["l"], name="lrelu", alpha=0.1),
             helper.make_node("Selu", ["l"], ["y"], name="selu")]
    outputs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, c, 8, 8])]
    infos = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, c, 8, 8])
             for n in ("conv", "p", "l")]
    for i in range(n_tensors):
        nodes.append(helper.make_node("Identity", [f"big{i}"], [f"big_out{i}"],
                                      name=f"id{i}"))
        outputs.append(helper.make_tensor_value_info(f"big_out{i}", TensorProto.FLOAT, [per]))
    inits += [w, s]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])]
    inputs += [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits]
    graph = helper.make_graph(nodes, "large", inputs, outputs, inits, value_info=infos)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 6)])
    m.ir_version = 3
    path = folder / "model.onnx"
    path.write_bytes(m.SerializeToString())  # onnx.save would look for the external data
    return path


def describe(path: str) -> dict:
    """Node count, default-domain opset and op counts of the model at ``path`` (its
    external data not loaded)."""
    import onnx

    m = onnx.load(path, load_external_data=False)
    opset = next((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), None)
    return {"nodes": len(m.graph.node), "opset": opset, "ir_version": m.ir_version,
            "ops": dict(Counter(n.op_type for n in m.graph.node))}


def main(argv: list[str]) -> int:
    what = argv[0] if argv else ""
    if what == "build" and len(argv) == 3:
        import onnx

        spec = Spec(**json.loads(argv[1]))
        out = Path(argv[2])
        tmp = out.with_name(out.name + ".part")
        onnx.save(build(spec), tmp)
        tmp.replace(out)
        return 0
    if what == "describe" and len(argv) == 2:
        print(json.dumps(describe(argv[1])))
        return 0
    if what == "external" and len(argv) == 3:
        print(build_external(Path(argv[1]), float(argv[2])))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
