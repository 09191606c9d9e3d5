"""Export the small CNN used by tests/test_other_ops.py (not run in CI).

Run with a Python that has torch (kept out of the project's venv):

    python3 -m venv /tmp/torchvenv && /tmp/torchvenv/bin/pip install torch==2.13.0 onnx
    /tmp/torchvenv/bin/python tests/data/export_cnn.py

Writes cnn_opset17.onnx, cnn_opset20.onnx (legacy TorchScript exporter) and cnn_ref.npz
(input ``x`` and torch's output ``y``) beside this file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch import nn

HERE = Path(__file__).resolve().parent


class SmallCNN(nn.Module):
    """Conv, BatchNormalization, residual Add, PRelu/LeakyRelu/Selu, pooling, Reshape,
    Flatten, Concat, ReduceMean, MatMul and Gemm -- a few channels so the files stay tiny."""

    def __init__(self, c: int = 4):
        super().__init__()
        self.conv1 = nn.Conv2d(3, c, 3, padding=1)
        self.bn1 = nn.BatchNorm2d(c)
        self.prelu = nn.PReLU(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.leaky = nn.LeakyReLU(0.1)
        self.pool = nn.MaxPool2d(2)
        self.avg = nn.AvgPool2d(2)
        self.selu = nn.SELU()
        self.gap = nn.AdaptiveAvgPool2d(1)
        self.proj = nn.Parameter(torch.randn(2 * c, 6) * 0.3)
        self.fc = nn.Linear(6 + 1, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.prelu(self.bn1(self.conv1(x)))
        y = self.leaky(self.bn2(self.conv2(y)) + y)          # residual Add
        y = self.avg(self.pool(y) * 0.5)                    # Mul, MaxPool, AveragePool
        n = y.shape[0]
        g = torch.flatten(self.gap(y), 1)                   # GlobalAveragePool, Flatten
        m = y.reshape(n, y.shape[1], -1).mean(dim=2)        # Shape/Gather, Reshape, ReduceMean
        z = torch.cat([g, self.selu(m)], dim=1)             # Concat, Selu
        z = z @ self.proj                                   # MatMul
        s = z.mean(dim=1, keepdim=True)                     # ReduceMean
        return self.fc(torch.cat([z, s], dim=1))            # Concat, Gemm


def main() -> None:
    torch.manual_seed(0)
    model = SmallCNN().eval()
    with torch.no_grad():  # non-trivial BN statistics and slopes
        for bn in (model.bn1, model.bn2):
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.2, 0.2)
        model.prelu.weight.copy_(torch.tensor([0.1, -0.3, 0.25, 0.6]))
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        y = model(x)
    for opset in (17, 20):
        # PRESERVE (the model is in eval mode) keeps BatchNormalization instead of folding it
        # into the Conv weights, so the converter sees it.
        torch.onnx.export(model, (x,), str(HERE / f"cnn_opset{opset}.onnx"), opset_version=opset,
                          input_names=["x"], output_names=["y"], dynamo=False,
                          training=torch.onnx.TrainingMode.PRESERVE,
                          dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    np.savez(HERE / "cnn_ref.npz", x=x.numpy(), y=y.numpy())


if __name__ == "__main__":
    main()
