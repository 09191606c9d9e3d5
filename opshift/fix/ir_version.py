"""The IR version, by the rule :mod:`opshift.graph.ir_versions` gives ``convert``, ``inspect`` and
``fix`` alike: raised when below what the model's content needs; annotations the declared
IR does not define dropped; never lowered (an IR above the opset's era is no defect)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opshift.graph import ir_versions

if TYPE_CHECKING:
    from opshift.fix.fixer import Fixer


def fix_ir_version(fx: Fixer) -> None:
    """Raise the declared IR version to what the model's content needs; drop the
    annotations it does not define."""
    m = fx.model
    declared = m.ir_version
    defect = ir_versions.ir_defect(m)
    if defect is not None:
        need, why = defect
        m.ir_version = need
        fx.change("ir_version", "model", "", f"IR version {declared} -> {need}", why)
    dropped = ir_versions.drop_annotations(m, m.ir_version)
    if dropped:
        fx.change("ir_version", "model", "", ir_versions.dropped_what(dropped),
                  ir_versions.dropped_why(m.ir_version))
