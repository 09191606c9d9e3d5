"""How often ``--verify`` runs the whole model on real exports, without --inputs or
--input-shape: PyTorch TorchScript and dynamo exports with dynamic axes (dynamo's with its
weights in external data), converted to opsets 9, 13 and 17.

Needs torch (and onnxscript for dynamo): ``pip install torch``. Each model is a small network
of a kind people export: a CNN with PReLU, a detector head (Concat of strided maps, Upsample,
TopK), a token-id transformer block (embedding, attention with a mask), a GRU over a sequence,
an audio front end (framing with a window, Conv1d). Prints one row per (model, opset): exit
code, verdict, whether the whole model ran, and why not; then the share that ran whole.

    python bench/corpus_verify.py [--keep DIR] [--opsets 9,13,17] [--exporter-shapes]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path


def _models():
    import torch
    from torch import nn

    class Cnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.c1, self.p1 = nn.Conv2d(3, 8, 3, padding=1), nn.PReLU(8)
            self.c2, self.p2 = nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.PReLU(16)
            self.pool, self.fc = nn.AdaptiveAvgPool2d(1), nn.Linear(16, 10)

        def forward(self, x):
            x = self.p2(self.c2(self.p1(self.c1(x))))
            return self.fc(torch.flatten(self.pool(x), 1))

    class Detector(nn.Module):
        def __init__(self):
            super().__init__()
            self.s1 = nn.Conv2d(3, 8, 3, stride=8, padding=1)
            self.s2 = nn.Conv2d(8, 8, 3, stride=2, padding=1)
            self.act = nn.LeakyReLU(0.1)
            self.head = nn.Conv2d(16, 6, 1)

        def forward(self, x):
            a = self.act(self.s1(x))
            b = self.act(self.s2(a))
            up = nn.functional.interpolate(b, scale_factor=2.0, mode="nearest")
            y = self.head(torch.cat([a, up], 1))
            # a YOLO-style grid over the map's run-time size (Range), boxes decoded on it
            h, w = y.shape[2], y.shape[3]
            gy = torch.arange(h, dtype=torch.float32).view(1, h, 1).expand(1, h, w)
            gx = torch.arange(w, dtype=torch.float32).view(1, 1, w).expand(1, h, w)
            cx = (torch.sigmoid(y[:, 0]) + gx) * 8
            cy = (torch.sigmoid(y[:, 1]) + gy) * 8
            scores = y[:, 4].flatten(1)
            top = torch.topk(scores, k=5, dim=1)
            return top.values, top.indices, torch.stack([cx, cy], 1).flatten(2)

    class Transformer(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.pos = nn.Embedding(100, 32), nn.Embedding(64, 32)
            self.att = nn.MultiheadAttention(32, 4, batch_first=True)
            self.norm, self.ff = nn.LayerNorm(32), nn.Sequential(nn.Linear(32, 64), nn.GELU(),
                                                                  nn.Linear(64, 32))

        def forward(self, ids, mask):
            pos = torch.arange(ids.shape[1], device=ids.device).unsqueeze(0)
            h = self.emb(ids) + self.pos(pos)
            a, _ = self.att(h, h, h, key_padding_mask=mask == 0)
            h = self.norm(h + a)
            return h + self.ff(h)

    class Rnn(nn.Module):
        def __init__(self):
            super().__init__()
            self.gru, self.out = nn.GRU(12, 16, batch_first=True), nn.Linear(16, 4)
            self.act = nn.SELU()

        def forward(self, x):
            y, _ = self.gru(x)
            return self.out(self.act(y))

    class Audio(nn.Module):
        """Framing by a strided Conv1d whose kernels are the window times a DFT basis (how
        STFT front ends export), a log magnitude, a Conv1d and a PReLU."""

        def __init__(self):
            super().__init__()
            n = torch.arange(64, dtype=torch.float32)
            k = torch.arange(33, dtype=torch.float32).unsqueeze(1)
            w = torch.hann_window(64)
            basis = torch.cat([torch.cos(2 * torch.pi * k * n / 64) * w,
                               -torch.sin(2 * torch.pi * k * n / 64) * w])
            self.register_buffer("basis", basis.unsqueeze(1))
            self.conv, self.act = nn.Conv1d(33, 16, 3, padding=1), nn.PReLU()

        def forward(self, wave):
            spec = nn.functional.conv1d(wave.unsqueeze(1), self.basis, stride=32)
            re, im = spec[:, :33], spec[:, 33:]
            mag = torch.log(re * re + im * im + 1e-6)
            return self.act(self.conv(mag))

    b, s = "batch", "seq"
    return [
        ("cnn", Cnn(), (torch.randn(1, 3, 32, 32),), ["x"],
         {"x": {0: b, 2: "h", 3: "w"}}),
        ("detector", Detector(), (torch.randn(1, 3, 64, 64),), ["x"],
         {"x": {0: b, 2: "h", 3: "w"}}),
        ("transformer", Transformer(), (torch.randint(0, 100, (1, 10)),
                                        torch.ones(1, 10, dtype=torch.int64)), ["ids", "mask"],
         {"ids": {0: b, 1: s}, "mask": {0: b, 1: s}}),
        ("gru", Rnn(), (torch.randn(1, 7, 12),), ["x"], {"x": {0: b, 1: s}}),
        ("audio", Audio(), (torch.randn(1, 1024),), ["wave"], {"wave": {0: b, 1: "samples"}}),
    ]


def export_all(folder: Path) -> list[Path]:
    """Each model exported by TorchScript (opset 13) and by dynamo (opset 18, its weights
    in external data): the files written."""
    import torch

    out = []
    for name, module, args, names, axes in _models():
        module.eval()
        path = folder / f"{name}_torchscript.onnx"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                torch.onnx.export(module, args, str(path), input_names=names, opset_version=13,
                                  dynamic_axes=axes, dynamo=False)
            out.append(path)
        except Exception as e:  # the exporter's own limits: said, not hidden
            print(f"{path.name}: TorchScript export failed: {str(e).splitlines()[0][:120]}",
                  file=sys.stderr)
        path = folder / f"{name}_dynamo.onnx"
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prog = torch.onnx.export(module, args, input_names=names, dynamo=True,
                                         dynamic_shapes=_dynamic_shapes(axes, names),
                                         opset_version=18)
                prog.save(str(path), external_data=True)
            out.append(path)
        except Exception as e:  # the exporter's own limits: said, not hidden
            print(f"{path.name}: dynamo export failed: {str(e).splitlines()[0][:120]}",
                  file=sys.stderr)
    return out


def _dynamic_shapes(axes, names):
    from torch.export import Dim

    dims: dict[str, object] = {}
    return tuple({i: dims.setdefault(n, Dim.AUTO) for i, n in axes[name].items()}
                 for name in names)


def exporter_shaped(folder: Path) -> list[Path]:
    """The tf2onnx, keras2onnx, TorchScript, dynamo and paddle2onnx activation forms the
    tests build (tests/exporter_models.py: NHWC Keras PReLU, TF maximum, Keras SELU, ...)."""
    import inspect

    import onnx

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    import exporter_models as em

    out = []
    for name, build in inspect.getmembers(em, inspect.isfunction):
        if name.startswith("_") or build.__module__ != em.__name__:
            continue
        try:
            model = build()
        except TypeError:  # a builder that needs arguments
            continue
        out.append(folder / f"{name}.onnx")
        onnx.save(model, out[-1])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", type=Path, help="export into this folder and keep it")
    ap.add_argument("--opsets", default="9,13,17")
    ap.add_argument("--exporter-shapes", action="store_true",
                    help="also the exporter-shaped models of tests/exporter_models.py")
    args = ap.parse_args()
    folder = args.keep or Path(tempfile.mkdtemp(prefix="opshift-corpus-"))
    folder.mkdir(parents=True, exist_ok=True)
    import shutil

    import torch

    torch.manual_seed(0)
    files = export_all(folder) + (exporter_shaped(folder) if args.exporter_shapes else [])
    shutil.rmtree(folder / "out", ignore_errors=True)
    ran = converted = 0
    for path in files:
        for opset in map(int, args.opsets.split(",")):
            out = folder / "out" / str(opset)  # (a folder each: dynamo's .data beside it)
            out.mkdir(parents=True, exist_ok=True)
            p = subprocess.run([sys.executable, "-m", "opshift", "convert", str(path), "--opset",
                                str(opset), "-o", str(out / path.name), "--verify", "--json"],
                               capture_output=True, text=True)
            d = json.loads(p.stdout.splitlines()[0]) if p.stdout.strip() else {}
            v = d.get("verify") or {}
            whole = bool(v.get("checks", {}).get("whole_model"))
            why = (v.get("unchecked") or [{}])[0].get("why", "") or \
                ((d.get("error") or {}).get("message", "") if p.returncode == 2 else "")
            if v:
                converted += 1
                ran += whole
            print(f"{path.name:28} {opset:3} exit {p.returncode} {v.get('verdict', '-'):10} "
                  f"whole={'yes' if whole else 'no':3} {why[:110]}")
    print(f"whole model run on {ran} of {converted} conversions written "
          f"({100 * ran / max(converted, 1):.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
