"""The step functions, one module per concern: what the schemas do not say about a version
step (see :mod:`opshift.conversion.registry`). Importing this package registers them all."""

from . import (  # noqa: F401
    attribute_inputs,
    attribute_values,
    bfloat16,
    broadcast_legacy,
    broadcast_to,
    constant,
    depth_to_space,
    dequantize,
    late_types,
    missing_ops,
    mod,
    negative_axes,
    optional,
    pooling,
    prelu,
    range,
    refused,
    renamed,
    reverse_sequence,
    sampling,
    scan,
    softmax,
    training,
    where,
)
