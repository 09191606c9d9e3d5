"""Op implementations; importing this package registers them all."""

from . import activations, control, elementwise, nn, reduce, tensor, windows  # noqa: F401
