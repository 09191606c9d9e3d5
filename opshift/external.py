"""External tensor data: read only inside the model's folder, copy without loading.

onnx's own ``load_external_data_for_model`` follows any ``location``; opshift refuses a
location that leaves the model's folder, so no file outside it is ever read.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import onnx
from onnx.external_data_helper import _get_all_tensors, uses_external_data

from .errors import ModelLoadError


def _info(tensor: onnx.TensorProto) -> dict[str, str]:
    return {e.key: e.value for e in tensor.external_data}


def resolve_location(base_dir: Path, location: str, origin: str, tensor_name: str) -> Path:
    """The absolute file for ``location``; refuse anything outside ``base_dir``."""
    base = base_dir.resolve()
    if not location or os.path.isabs(location):
        raise ModelLoadError(f"{origin}: tensor {tensor_name!r}: external data location "
                             f"{location!r} must be a relative path inside the model's folder")
    target = (base / location).resolve()
    if target != base and base not in target.parents:
        raise ModelLoadError(f"{origin}: tensor {tensor_name!r}: external data location "
                             f"{location!r} points outside the model's folder; refused")
    return target


def external_files(model: onnx.ModelProto, base_dir: Path, origin: str = "<model>"
                   ) -> dict[str, Path]:
    """location -> resolved file, for every external tensor, after checking each exists and
    is long enough for the offsets/lengths the tensors declare."""
    needed: dict[str, int] = {}
    files: dict[str, Path] = {}
    for t in _get_all_tensors(model):
        if not uses_external_data(t):
            continue
        info = _info(t)
        loc = info.get("location", "")
        files[loc] = resolve_location(base_dir, loc, origin, t.name)
        offset = int(info.get("offset", 0) or 0)
        length = info.get("length")
        if length is not None:
            needed[loc] = max(needed.get(loc, 0), offset + int(length))
    for loc, f in files.items():
        if not f.is_file():
            raise ModelLoadError(f"{origin}: external data file {loc!r} is missing")
        size = f.stat().st_size
        if size < needed.get(loc, 0):
            raise ModelLoadError(f"{origin}: external data file {loc!r} is shorter than declared "
                                 f"({size} bytes, tensors need {needed[loc]})")
    return files


def load_external_data_safely(model: onnx.ModelProto, base_dir: Path, origin: str) -> None:
    """Load every external tensor into ``model`` after the checks of :func:`external_files`."""
    external_files(model, base_dir, origin)
    onnx.external_data_helper.load_external_data_for_model(model, str(base_dir))


def place_external_data(model: onnx.ModelProto, source_dir: Path, dest_dir: Path) -> list[Path]:
    """Make the external data files of ``model`` available under ``dest_dir``.

    Files keep their relative locations. Same folder: nothing to do. Otherwise a
    copy through the kernel (``shutil.copyfile`` uses sendfile/copy_file_range, so the data
    never passes through Python). Hard links are not used: onnx refuses to load external data
    files with several links (its hardlink-attack check). Returns the files created, so a
    failed save can remove them.
    """
    files = external_files(model, source_dir)
    if source_dir.resolve() == dest_dir.resolve():
        return []
    created: list[Path] = []
    for loc, src in files.items():
        dst = dest_dir / loc
        if dst.exists():
            if dst.resolve() == src.resolve() or os.path.samefile(dst, src):
                continue
            raise ModelLoadError(f"{dst}: external data file already exists; refusing to "
                                 "overwrite it")
        dst.parent.mkdir(parents=True, exist_ok=True)
        tmp = dst.with_name(f".{dst.name}.tmp")
        try:
            shutil.copyfile(src, tmp)
            os.replace(tmp, dst)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        created.append(dst)
    return created
