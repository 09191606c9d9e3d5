"""Op implementations; importing this package registers them all."""

from . import activations, control, elementwise, nn, reduce, tensor, upsample, windows  # noqa: F401
