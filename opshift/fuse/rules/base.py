"""The base of every fusion rule: an onnxscript pattern rule whose check plans the fused op
(or refuses, recording why) and whose rewrite emits what was planned."""

from __future__ import annotations

from onnxscript.rewriter import pattern
from onnxscript.rewriter._basics import MatchResult

from opshift.fuse.report import Recorder, inline_prefix
from opshift.fuse.rules import checks as ck
from opshift.fuse.values import InferredTypes, Match


def cmp_alternatives(op, x, z, negative: bool):
    """(pattern, zero_goes_to_slope_branch) for every comparison form of ``x < 0``
    (``negative``) or ``x > 0``."""
    if negative:
        forms = [
            (op.Less(x, z), False), (op.Greater(z, x), False),
            (op.Not(op.GreaterOrEqual(x, z)), False), (op.Not(op.LessOrEqual(z, x)), False),
            (op.LessOrEqual(x, z), True), (op.GreaterOrEqual(z, x), True),
            (op.Not(op.Greater(x, z)), True), (op.Not(op.Less(z, x)), True),
        ]
    else:
        forms = [
            (op.Greater(x, z), True), (op.Less(z, x), True),
            (op.Not(op.LessOrEqual(x, z)), True), (op.Not(op.GreaterOrEqual(z, x)), True),
            (op.GreaterOrEqual(x, z), False), (op.LessOrEqual(z, x), False),
            (op.Not(op.Less(x, z)), False), (op.Not(op.Greater(z, x)), False),
        ]
    return pattern.OrValue([f for f, _ in forms], tag_var="zero_to_slope",
                           tag_values=[t for _, t in forms])


class Rule(pattern.RewriteRuleClassBase):
    """check() runs ``plan()`` with the :class:`~opshift.fuse.values.Match` it makes of
    onnxscript's match context; a :class:`ck.Refuse` becomes a MatchResult failure (and a
    recorded refusal); rewrite() emits the planned op.

    Rounding. A plan whose pattern rounds otherwise than the op (``Plan.rounding``, e.g. a
    Selu body computed step by step in float16, where the op computes in float32 and rounds
    once) is refused unless ``allow_rounding``, whatever the form.

    Sign of zero. A plan whose op may give a zero of the other sign than the pattern
    (``Plan.signed_zero_exact`` False) is refused, with the plan's reason, unless
    ``allow_rounding`` -- or unless the rule sets :attr:`inline_form`: the forms ``inline``
    itself writes, whose sign-of-zero difference from the op is ``inline``'s documented one,
    so that fusing them gives the op back as the model had it.
    """

    #: The rule's pattern is one ``inline`` writes (see the class docstring).
    inline_form = False

    def __init__(self, allow_rounding: bool = False, recorder: Recorder | None = None,
                 inferred: InferredTypes | None = None) -> None:
        super().__init__(name=type(self).__name__)
        self.allow_rounding = allow_rounding
        #: where the fusions and refusals of the run go (None: not recorded)
        self.recorder = recorder
        #: the types onnx shape inference found for the model (None: the IR's only)
        self.inferred = inferred
        self._plan: ck.Plan | None = None

    def plan(self, match: Match, **bindings) -> ck.Plan:  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, context, **bindings) -> MatchResult:
        self._plan = None
        rec = self.recorder
        if rec is not None and not rec.selected(context.nodes):
            return MatchResult().fail("not among the regions asked for")
        self._anchor = context.root
        self._matched = context.nodes
        self._model = context.model
        match = Match(context, context.model.graph,
                      inline_prefix(context.root, tuple(context.nodes)) is not None,
                      context.model.ir_version < 4, self.inferred)
        try:
            self._plan = self._admit(self.plan(match, **bindings))
        except (ck.Refuse, ValueError, TypeError, AttributeError, IndexError) as e:
            # refusing is always safe; an unexpected error in a check refuses too, visibly
            reason = str(e) if isinstance(e, ck.Refuse) else \
                f"internal error in the check ({type(e).__name__}: {e}); not fused"
            if rec is not None:
                rec.refuse(self.name, context.root, reason)
            return MatchResult().fail(reason)
        if rec is not None and rec.capture:
            from opshift.fuse.region import capture

            label = f"{context.root.name or context.root.op_type} -> {self._plan.op}"
            rec.pending = capture(label, match, self._plan)
        return MatchResult()

    def _admit(self, plan: ck.Plan) -> ck.Plan:
        if plan.rounding and not self.allow_rounding:
            raise ck.Refuse(f"{plan.rounding}; not exact (allow_rounding=True fuses it anyway)")
        if plan.signed_zero_exact or self.allow_rounding or self.inline_form:
            return plan
        raise ck.Refuse(f"{plan.zero_sign}; not exact in the sign of zero (allow_rounding=True "
                        "fuses it anyway)")

    def rewrite(self, op, **bindings):
        plan = self._plan
        assert plan is not None
        self._plan = None
        rec = self.recorder
        if rec is not None:
            rec.cleanup.extend(plan.cleanup)
            rec.initializers.extend(v for n in (*self._matched, *plan.cleanup) for v in n.inputs
                                    if v is not None and v.is_initializer())
        if plan.op == "PRelu":
            slope = plan.slope
            if slope is None:
                import onnx_ir as ir

                # named here: opshift.fuse runs no name-fixing pass after the rules
                base = self._anchor.outputs[0].name or "prelu"
                name = rec.fresh_value_name(self._model, f"{base}/slope") if rec else None
                slope = op.Constant(value=ir.tensor(plan.slope_array),
                                    _outputs=[name] if name else 1)
                if name:
                    slope.producer().name = name
            out = op.PRelu(plan.x, slope)
        elif plan.op == "LeakyRelu":
            out = op.LeakyRelu(plan.x, alpha=plan.attrs["alpha"])
        else:
            out = op.Selu(plan.x, alpha=plan.attrs["alpha"], gamma=plan.attrs["gamma"])
        producer = out.producer()
        if producer is not None:
            # the anchor is removed: its name (or none), or the name of the node inline wrote
            # these nodes for
            back = rec.inlined_name(self._model, self._anchor, tuple(self._matched)) \
                if rec is not None else None
            producer.name = back or self._anchor.name
        if rec is not None:
            rec.fuse(self.name, self._anchor, plan.describe(), producer, tuple(self._matched),
                     "" if plan.signed_zero_exact else plan.zero_sign)
        return out
