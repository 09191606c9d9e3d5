"""Op implementations; importing this package registers them all."""

from . import activations  # noqa: F401
