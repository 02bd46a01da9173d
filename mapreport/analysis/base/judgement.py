"""A judgement: one family's rule over its figures, stated with the figure, its n and CI, and
the rule's bound. Each family's rule lives beside the figure it reads (`timeline.judge`,
`compiles.judge`, ...); `status.slice_status` takes the worst (docs/metrics.md, "Judgements").
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from mapreport.core.kinds import FigureUnit, JudgementFamily, Status, StatusReason

SEVERITY = {Status.FAILING: 0, Status.AT_RISK: 1, Status.HEALTHY: 2, Status.NOT_JUDGED: 3}
"""Most severe first; not_judged comes last: a rule that checked nothing decides nothing."""
ORDER = {family: i for i, family in enumerate(JudgementFamily)}


class Judgement(msgspec.Struct, frozen=True):
    """One family's state, why, and the figure it rests on."""

    family: JudgementFamily
    state: Status
    reason: StatusReason
    figure: float | None = None
    """The figure the rule compared (None: the rule had none to compare)."""
    unit: FigureUnit = FigureUnit.COUNT
    bound: float | None = None
    """What the figure was compared with: the target, or the rule's threshold."""
    n: int | None = None
    """The samples (requests, calls, kernels, compile attempts) the figure rests on."""
    ci: tuple[float, float] | None = None
    subject: str = ""
    """What it is about where not the whole slice (a shape, a frame, an action id)."""

    @property
    def judged(self) -> bool:
        """The rule checked something (failing, at risk or healthy)."""
        return self.state is not Status.NOT_JUDGED


def worst(judgements: Sequence[Judgement]) -> Judgement | None:
    """The deciding judgement: the most severe judged one, ties in family order (None: none
    was judged)."""
    judged = [j for j in judgements if j.judged]
    if not judged:
        return None
    return min(judged, key=lambda j: (SEVERITY[j.state], ORDER[j.family]))


def ordered(judgements: Sequence[Judgement]) -> tuple[Judgement, ...]:
    """Judgements most severe first (not_judged last), ties in family order."""
    return tuple(sorted(judgements, key=lambda j: (SEVERITY[j.state], ORDER[j.family])))
