"""Op implementations; importing this package registers them all."""

from opshift.evaluator.ops import (  # noqa: F401
    activations,
    control,
    detection,
    elementwise,
    indexing,
    ml,
    nn,
    optional,
    order,
    pools,
    quantize,
    reduce,
    resize,
    sampling,
    tensor,
    windows,
)
