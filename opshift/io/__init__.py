"""Models and tensors in and out: :mod:`.models` loads and checks a model (any kind: path,
ModelProto, onnx_ir.Model), :mod:`.tensors` is the one reader of tensor data (external data
included), :mod:`.output` writes a command's outputs atomically."""
