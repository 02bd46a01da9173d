"""The tail judgement (docs/metrics.md, "Judgements"): the slice's p99 over its shapes'
medians with its bootstrap CI; at risk only when the whole CI is beyond HEAVY_TAIL, naming
the driver; healthy otherwise; not judged without latency or below the p99 sample minimum."""

from __future__ import annotations

import numpy as np
import pytest

from mapreport.analysis.base.common import Interval, Thresholds
from mapreport.analysis.base.stats import SortedArray, quantile, resampled_quantile
from mapreport.analysis.serving.tail import HEAVY_TAIL, TailRatio, TopSample, judge
from mapreport.core.kinds import BottleneckClass, FigureUnit, Status, StatusReason
from mapreport.report.judgements import line

TH = Thresholds()


@pytest.mark.parametrize(
    ("t", "driver", "state", "reason"),
    [
        (TailRatio(600, 600, 20.7, Interval(12.0, 20.8)), BottleneckClass.QUEUEING,
         Status.AT_RISK, StatusReason.TAIL_HEAVY),
        (TailRatio(600, 600, 8.6, Interval(7.3, 11.1)), BottleneckClass.INSUFFICIENT_EVIDENCE,
         Status.AT_RISK, StatusReason.TAIL_UNEXPLAINED),
        # heavy at its point, but the CI reaches the bound: not established
        (TailRatio(600, 600, 20.7, Interval(1.3, 20.8)), BottleneckClass.QUEUEING,
         Status.HEALTHY, StatusReason.TAIL_LIGHT),
        (TailRatio(600, 600, 1.2, Interval(1.18, 1.25)), None, Status.HEALTHY,
         StatusReason.TAIL_LIGHT),
        (TailRatio(60, 60, None, None), None, Status.NOT_JUDGED, StatusReason.TAIL_FEW_SAMPLES),
        (TailRatio(0, 0, None, None), None, Status.NOT_JUDGED, StatusReason.NO_REQUESTS),
    ],
)  # fmt: skip
def test_the_tail_rule(
    t: TailRatio, driver: BottleneckClass | None, state: Status, reason: StatusReason
) -> None:
    judged = judge(t, driver, TH)
    assert judged is not None
    assert (judged.state, judged.reason) == (state, reason)
    if reason is StatusReason.TAIL_HEAVY:
        assert judged.subject == "queueing"
        assert judged.unit is FigureUnit.RATIO
        assert judged.bound == HEAVY_TAIL
        assert line(judged) == (
            "p99 is 20.70x its shape's median (95% CI 12.00x to 20.80x), beyond 3.00x: "
            "queueing drives it"
        )
    assert judge(None, driver, TH) is None  # no request: no tail family at all


def test_without_latency_the_blocked_share_decides_the_tail() -> None:
    """Profiler spans record no arrival: the tail is at risk when blocking decided it from the
    blocked share (19 of 200 blocked, 95% CI 6.2% to 14.4%, above a p95 tail's 5%: the real
    torch-dynamic run), and not judged when it did not (3 of 200: its CI reaches 5%)."""
    from mapreport.analysis.serving.classify import blocked_evidence, read_blocked_share

    spans = TailRatio(0, 0, None, None)
    decided = blocked_evidence(read_blocked_share(19, 200, ("trace",)))
    judged = judge(spans, BottleneckClass.BLOCKED_BEHIND_ADAPTATION, TH, decided)
    assert judged is not None
    assert (judged.state, judged.reason) == (Status.AT_RISK, StatusReason.TAIL_BLOCKED)
    assert line(judged) == (
        "9.5% of 200 requests (95% CI 6.2% to 14.4%) waited behind adaptation, more than a "
        "p95 tail holds (5.0%); their latency is not recorded (profiler spans)"
    )
    few = blocked_evidence(read_blocked_share(3, 200, ("trace",)))
    assert few is None
    judged = judge(spans, BottleneckClass.INSUFFICIENT_EVIDENCE, TH, few)
    assert judged is not None
    assert judged.state is Status.NOT_JUDGED


def test_the_top_of_a_sample_gives_the_whole_sample_s_p99_and_bootstrap() -> None:
    """Reading only the largest 2% (+200) of the values gives the p99 and every resample's p99
    that the whole sorted sample gives, with the same seed."""
    x = np.random.default_rng(3).lognormal(0.0, 0.5, 5_000)
    whole, k = SortedArray(x), int(np.ceil(0.02 * len(x))) + 200
    top = TopSample(len(x), np.sort(x)[-k:])
    assert quantile(top, 0.99) == quantile(whole, 0.99) == pytest.approx(np.quantile(x, 0.99))
    a = resampled_quantile(top, 0.99, 2_000, np.random.default_rng(5))
    b = resampled_quantile(whole, 0.99, 2_000, np.random.default_rng(5))
    assert np.array_equal(a, b)
