"""A model file opened as every command opens it: loaded (:mod:`opshift.io.models`), then
the structural check (:mod:`.structure`) before anything is rewritten."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import onnx

from opshift.check import structure
from opshift.io.models import load
from opshift.io.tensors import external_files


class Loaded(NamedTuple):
    """A model as every command opens it, and the folder its external data is relative to
    (None when it has none: then :func:`opshift.io.models.save` need not look for any)."""

    model: onnx.ModelProto
    source_dir: Path | None


def open_checked(path: str | os.PathLike, *, allow: Iterable[str] = (),
                 load_external_data: bool = False, index=None) -> Loaded:
    """:func:`opshift.io.models.load`, then the checks every command runs before it rewrites
    anything.

    External data must sit inside the model's folder and be as long as declared, and the
    graph must pass :func:`opshift.check.structure.check` (problem kinds in ``allow`` excepted),
    which fills ``index`` (an :class:`opshift.graph.index.ModelIndex`) when given.
    """
    path = Path(path)
    model = load(path, load_external_data=load_external_data)
    if index is None:  # the walk's external-data finding spares a second walk
        index = structure.ModelIndex(full=False)
    structure.check(model, str(path), allow=allow, index=index)
    if index.external and not load_external_data:
        external_files(model, path.parent, str(path))
    return Loaded(model, path.resolve().parent if index.external or load_external_data
                  else None)


def load_checked(path: str | os.PathLike, *, allow: Iterable[str] = (),
                 load_external_data: bool = False) -> onnx.ModelProto:
    """:func:`open_checked`'s model."""
    return open_checked(path, allow=allow, load_external_data=load_external_data).model
