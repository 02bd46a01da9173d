"""Every category mapreport decides, declared once as a StrEnum.

Members are strings (their value is the identifier findings.json and the history tables
store), so they compare equal to the stored text and serialise as it. The report gives each
member its words (`mapreport.report.words`); a completeness test checks that none lacks one.
"""

from __future__ import annotations

from enum import StrEnum


class Decision(StrEnum):
    """The accuracy-versus-gain decision of one shape (METRICS.md's two-by-two table)."""

    SPECIALISE = "specialise"
    STATIC_SUFFICIENT = "static_sufficient"
    CLOSE_THE_LOOP = "close_the_loop"
    FIND_BOTTLENECK = "find_bottleneck"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence"


class BottleneckClass(StrEnum):
    """The first-principles class that explains a shape's symptom."""

    BLOCKED_BEHIND_ADAPTATION = "blocked_behind_adaptation"
    """Its tail waited behind another request's adaptation on the same worker (the slice's
    blocking finding names the cause)."""
    QUEUEING = "queueing"
    CORE_IMBALANCE = "core_imbalance"
    MAPPING_FALLBACK = "mapping_fallback"
    MEMORY_BURST = "memory_burst"
    MAPPING_INACCURACY = "mapping_inaccuracy"
    ADAPTATION_OVERHEAD = "adaptation_overhead"
    NONE = "none"
    INSUFFICIENT_EVIDENCE = "insufficient_evidence"


class Driver(StrEnum):
    """Tail drivers in attribution order: each takes what it can of the excess left by the
    ones before it, and the residual is what none explains. Queue wait is split in two: a
    request blocked behind adaptation (analysis/blocking.py) gives its queue excess to
    `blocked_behind_adaptation`, any other to `queueing` (load)."""

    BLOCKED_BEHIND_ADAPTATION = "blocked_behind_adaptation"
    QUEUEING = "queueing"
    MAPPING_FALLBACK = "mapping_fallback"
    MEMORY_BURST = "memory_burst"
    CORE_IMBALANCE = "core_imbalance"
    RESIDUAL = "residual"


class OwnerRole(StrEnum):
    """The roles of METRICS.md that own actions and sign a review (config keys)."""

    COMPILER_LEAD = "compiler_lead"
    RUNTIME_LEAD = "runtime_lead"
    OBSERVABILITY_ENGINEER = "observability_engineer"
    MODEL_SERVING_ARCHITECT = "model_serving_architect"


class AccuracyState(StrEnum):
    """How a shape's compile-time prediction compares with its measured static compute."""

    ACCURATE = "accurate"
    INACCURATE = "inaccurate"
    UNCOVERED = "uncovered"
    NOT_MEASURED = "not_measured"
    NO_PREDICTION = "no_prediction"


class GainState(StrEnum):
    """What runtime adaptation gained on a shape, by the CI of its net p50 gain."""

    SIGNIFICANT = "significant"
    NOT_SIGNIFICANT = "not_significant"
    REGRESSION = "regression"
    NOT_MEASURED = "not_measured"


class ActionKind(StrEnum):
    """What a retuning action changes. The tail classes and the two decisions that call for
    work are kinds of their own; the last three rest on a missing or differing record."""

    ADAPTATION_BLOCKING = "adaptation_blocking"
    """Slice-wide: requests of any shape wait behind serving-time adaptation."""
    QUEUEING = "queueing"
    CORE_IMBALANCE = "core_imbalance"
    MAPPING_FALLBACK = "mapping_fallback"
    MEMORY_BURST = "memory_burst"
    MAPPING_INACCURACY = "mapping_inaccuracy"
    ADAPTATION_OVERHEAD = "adaptation_overhead"
    COST_MODEL_DRIFT = "cost_model_drift"
    """A shape's signed error moved beyond tolerance from its plan's first nights."""
    LATENCY_REGRESSION = "latency_regression"
    """A shape's p95 rose beyond its CI against the compared night."""
    SPECIALISE = "specialise"
    CLOSE_THE_LOOP = "close_the_loop"
    OBSERVABILITY = "observability"
    PRECISION_WITHOUT_QUALITY = "precision_without_quality"
    ENVIRONMENT_MISMATCH = "environment_mismatch"
    ROOFLINE_HEADROOM = "roofline_headroom"
    """An op x shape spends material device time above its roofline bound (a trace alone)."""
    DEVICE_IDLE = "device_idle"
    """The device sat idle for a material share of its span: launch and scheduling."""
    GRAPH_PADDING = "graph_padding"
    """Steps padded up to a captured graph size waste a material share of the replays."""
    DYNAMIC_SHAPES = "dynamic_shapes"
    """A compiled frame recompiled for the shapes it met (or hit its recompile limit): make the
    varying dims dynamic, bucket the shapes, or hold the guarded value constant."""
    TUNING_REGRET = "tuning_regret"
    """A tuning run chose a config materially slower than the best measured for its workload:
    retune with a named budget, pin the best measured config, or fix the cost model."""


class HeadroomRemedy(StrEnum):
    """What brings an op x shape toward its roofline, by what keeps it from it."""

    FUSE_OR_BATCH = "fuse_or_batch"
    """Each call is too small to fill the device (microseconds against a sub-microsecond
    roof): fewer, larger launches."""
    FUSE_OR_LAYOUT = "fuse_or_layout"
    """Memory-bound and short of bandwidth: less traffic (fusion) or better access (layout)."""
    TUNE_KERNEL = "tune_kernel"
    """Compute-bound and short of the peak: another kernel or tiling."""


BLOCKERS: tuple[ActionKind, ...] = (
    ActionKind.PRECISION_WITHOUT_QUALITY,
    ActionKind.ENVIRONMENT_MISMATCH,
    ActionKind.OBSERVABILITY,
)
"""Actions that block a trustworthy result, in the order they rank above every tuning action
whatever its traffic: a precision change without quality evidence, an unlocked environment,
missing telemetry."""

EVIDENCE_FREE = frozenset(
    {
        ActionKind.OBSERVABILITY,
        ActionKind.ENVIRONMENT_MISMATCH,
        ActionKind.PRECISION_WITHOUT_QUALITY,
    }
)
"""Action kinds that rest on a missing or differing record, not on a statistic."""


class ImpactUnit(StrEnum):
    """The unit of an action's impact (`analysis/impact.py`): time over the report's period,
    or a share a reader can weigh."""

    LATENCY_US = "latency_us"
    """Request latency the action's driver holds: the part of the tail requests' latency
    above their shape's p50 (or the wait behind adaptation), summed over the period."""
    COMPUTE_US = "compute_us"
    """Compute the shape's requests save or lose at the measured net p50 gain, summed."""
    DEVICE_US = "device_us"
    """Device time in the trace: above the roofline bound, or spent on graph padding."""
    DEVICE_SHARE = "device_share"
    """A share of the devices' span (idle)."""
    DEVICE_US_PER_CALL = "device_us_per_call"
    """A tuned kernel's time above the best config measured for its workload, per call
    (chosen_us - best_us): tuning records count no calls, so no total over the period."""
    REQUEST_SHARE = "request_share"
    """The share of the slice's requests the action's shape carries."""
    NONE = "none"
    """No figure: the action asks for a record, not a change."""


class BlockingRemedy(StrEnum):
    """What removes head-of-line blocking behind adaptation, by what the evidence shows of the
    adapting requests (`analysis.blocking.remedy`)."""

    PRECOMPILE_IN_WARMUP = "precompile_in_warmup"
    """Each adapting shape was new to the server when it adapted, and they are few."""
    COMPILE_ASYNC = "compile_async"
    """New shapes adapted, too many to warm up: compile off the serving path."""
    MARK_DYNAMIC = "mark_dynamic"
    """A shape served before adapted again: its compiled artefact did not hold."""
    COVER_IN_PLAN = "cover_in_plan"
    """The worker was held by the generic fallback path only."""
    RAISE_RECOMPILE_LIMIT = "raise_recompile_limit"
    """The compiler refused to compile at its recompile limit, so new shapes ran eagerly:
    warm-up compiles count against the same limit, so pre-compiling cannot help."""


class Collect(StrEnum):
    """What to collect next to settle a thin finding (`analysis.observe`)."""

    MORE_REQUESTS = "more_requests"
    PROFILER_TRACE = "profiler_trace"
    CORE_TELEMETRY = "core_telemetry"
    MEMORY = "memory"
    SERVER_TIMING = "server_timing"
    ARRIVALS = "arrivals"
    STATIC_REQUESTS = "static_requests"


class ActionState(StrEnum):
    """Where an action stands after a run (the closed loop across nights)."""

    NEW = "new"
    OPEN = "open"
    VERIFIED = "verified"
    ROLLBACK_DUE = "rollback_due"
    ROLLED_BACK = "rolled_back"
    DROPPED = "dropped"


class Health(StrEnum):
    """A slice's state on the index, the first that holds in this order."""

    SLA_MISSED = "sla_missed"
    ENVIRONMENT_UNLOCKED = "environment_unlocked"
    CHECKLIST_FAILING = "checklist_failing"
    HEALTHY = "healthy"


class Status(StrEnum):
    """A slice's status on page 1 and the board (and each judgement's state), most severe
    first. `not_judged`: nothing the slice holds could be checked by the rule (no SLA set, no
    data of that kind): never counted as healthy."""

    FAILING = "failing"
    AT_RISK = "at_risk"
    HEALTHY = "healthy"
    NOT_JUDGED = "not_judged"


class JudgementFamily(StrEnum):
    """A family of figures that judges a slice (`analysis/judgement.py`), in the order a tie
    between equally severe judgements is decided."""

    SLA = "sla"
    """Latency p95/p99 against the configured SLA."""
    COMPILES = "compiles"
    """Compile attempts that failed or hit the recompile limit, and recompiles per frame."""
    DEVICE = "device"
    """Device time against the traced span: how much of it the devices sat idle."""
    LOOP = "loop"
    """The closed loop's actions against tonight's figures (rollback triggers)."""
    REGRESSION = "regression"
    """Shapes' p95 against the compared night, and the slice's change points."""
    TAIL = "tail"
    """How heavy the latency tail is against each request's shape median, and what drives it
    (the target is the SLA's; the tail's shape is this)."""
    QUALITY = "quality"
    """Precision changes against their quality evidence."""
    EAGER_FALLBACK = "eager_fallback"
    """Requests that ran the generic (eager) path instead of a compiled mapping."""
    ROOFLINE = "roofline"
    """Device time above the roofline bound of the ops that spent it."""
    CUDA_GRAPHS = "cuda_graphs"
    """Captured graph buckets: padding waste and steps replayed eagerly."""
    GRAPH_BREAKS = "graph_breaks"
    """Graph breaks that split a compiled frame."""
    ENVIRONMENT = "environment"
    """The compile side's environment against the runtime side's."""
    RANKING = "ranking"
    """Tuning runs' chosen configs against the best measured for their workloads (regret)."""


class FigureUnit(StrEnum):
    """The unit of the figure a judgement rests on."""

    US = "us"
    SHARE = "share"
    COUNT = "count"
    RATIO = "ratio"
    """Times another figure (a p99 over a median)."""


class StatusReason(StrEnum):
    """What decided a slice's status."""

    SLA_MISSED = "sla_missed"
    """A target the slice has the evidence to judge is missed."""
    LITTLE_HEADROOM = "little_headroom"
    """Met, but within AT_RISK_HEADROOM of the target."""
    REGRESSED = "regressed"
    """Met, but shapes' p95 rose beyond their CIs against the compared night."""
    RISING = "rising"
    """Met, but the tail shifted up at a change point of its history."""
    WITHIN_SLA = "within_sla"
    NO_SLA = "no_sla"
    """No target it can be judged against (none configured, or too few samples)."""
    NO_REQUESTS = "no_requests"
    """No per-request latency at all (a profiler trace, a compile log alone)."""
    TOO_FEW_SAMPLES = "too_few_samples"
    """A target is set, but the slice has too few requests to state its quantile."""
    FIRST_NIGHT = "first_night"
    """No earlier night to compare with."""
    NO_REGRESSION = "no_regression"
    COMPILE_FAILED = "compile_failed"
    RECOMPILE_LIMIT = "recompile_limit"
    """The compiler refused to compile again (its recompile limit): the frame ran eagerly."""
    MANY_RECOMPILES = "many_recompiles"
    ALL_COMPILED = "all_compiled"
    """Every compile attempt compiled, and nothing recompiles at run time (an ahead-of-time
    compiler's records: TVM, TensorRT)."""
    COMPILED = "compiled"
    DEVICE_CAPTURE = "device_capture"
    """Every trace is a graph capture (the server's start-up): its idle is not serving idle."""
    DEVICE_IDLE = "device_idle"
    DEVICE_BUSY = "device_busy"
    ROLLBACK_DUE = "rollback_due"
    """A tracked action's rollback trigger is exceeded on this night."""
    LOOP_ON_TRACK = "loop_on_track"
    QUALITY_DROP = "quality_drop"
    """A precision change whose quality drop exceeds its record's max_drop."""
    NO_QUALITY_EVIDENCE = "no_quality_evidence"
    DESCRIBED_PRECISION = "described_precision"
    QUALITY_HELD = "quality_held"
    EAGER_REQUESTS = "eager_requests"
    NO_EAGER_REQUESTS = "no_eager_requests"
    ROOFLINE_HEADROOM = "roofline_headroom"
    NEAR_ROOFLINE = "near_roofline"
    NO_DEVICE_LIMITS = "no_device_limits"
    PADDING_WASTE = "padding_waste"
    GRAPHS_REPLAYED = "graphs_replayed"
    GRAPH_BREAKS = "graph_breaks"
    NO_GRAPH_BREAKS = "no_graph_breaks"
    ENVIRONMENT_DIFFERS = "environment_differs"
    ENVIRONMENT_LOCKED = "environment_locked"
    ENVIRONMENT_NOT_RECORDED = "environment_not_recorded"
    """The compile side was read only from a JIT compiler's logs (TORCH_TRACE): it compiled in
    the serving process, in the runtime's environment."""
    ENVIRONMENT_ONE_SIDE = "environment_one_side"
    """One side's environment is not recorded (or the run records none: torch.compile)."""
    TAIL_HEAVY = "tail_heavy"
    """p99 beyond HEAVY_TAIL x the shape's median with its CI, a tail driver deciding it."""
    TAIL_UNEXPLAINED = "tail_unexplained"
    """p99 beyond HEAVY_TAIL x the shape's median with its CI, and no driver decides it."""
    TAIL_LIGHT = "tail_light"
    """p99 not beyond HEAVY_TAIL x the shape's median with its CI."""
    TAIL_FEW_SAMPLES = "tail_few_samples"
    """Fewer requests with a measured latency (in shapes with a median) than a p99 needs."""
    TAIL_BLOCKED = "tail_blocked"
    """No latency recorded (profiler spans), and more requests waited behind adaptation than a
    p95 tail holds, with their Wilson CI: blocking decides the tail."""
    REGRET_MATERIAL = "regret_material"
    """A tuned workload's regret interval lies at or above MATERIAL_REGRET (`ranking.judge`)."""
    SEARCH_SHORT = "search_short"
    """A tuning run's regret is material (CI clear of 0), but its CI reaches below the bound."""
    TUNING_FAILED = "tuning_failed"
    CHOSE_WELL = "chose_well"
    NOTHING_RANKED = "nothing_ranked"
    TRANSFER_GAP = "transfer_gap"
    """A deployed kernel's runtime per call over its tuned time lies wholly beyond the transfer
    tolerance (`transfer.judge`): the tuning-time measurement did not predict production."""


class RegressionKind(StrEnum):
    """A shape's p95 change against an earlier run, by its CI."""

    REGRESSION = "regression"
    IMPROVEMENT = "improvement"
    NO_CHANGE = "no_change"


class Criterion(StrEnum):
    """When one row of a validation matrix passes."""

    HALVED = "halved"
    TENTH_LOWER = "tenth_lower"
    TENTH_LOWER_IN_BUDGET = "tenth_lower_in_budget"
    NO_FALLBACK = "no_fallback"
    APE_WITHIN = "ape_within"
    APE_WITHIN_AFTER_UPDATE = "ape_within_after_update"
    BACK_WITHIN_TOLERANCE = "back_within_tolerance"
    NOT_WORSE_THAN_STATIC = "not_worse_than_static"
    AT_MOST_ADAPTED = "at_most_adapted"
    NO_WORSE = "no_worse"
    NO_ERROR_INCREASE = "no_error_increase"
    GUARDS_NEIGHBOUR = "guards_neighbour"
    QUALITY_GUARD = "quality_guard"
    QUALITY_MAX_DROP = "quality_max_drop"
    PRESENT_IN_EVERY_FILE = "present_in_every_file"
    PRESENT_ON_EVERY_REQUEST = "present_on_every_request"
    SAME_ON_BOTH_SIDES = "same_on_both_sides"
    AGREES_WITHIN = "agrees_within"
    BACK_TO_BEFORE = "back_to_before"
    REGRET_WITHIN = "regret_within"
    RANKS_WELL = "ranks_well"


class CheckItem(StrEnum):
    """The five review-checklist items of METRICS.md."""

    SCOPE = "scope"
    ENVIRONMENT = "environment"
    EVIDENCE = "evidence"
    OWNERSHIP = "ownership"
    SIGNOFF = "signoff"


class CheckState(StrEnum):
    """Where one review-checklist item stands: `pass` only when something was checked."""

    PASS = "pass"
    FAIL = "fail"
    NOT_APPLICABLE = "not_applicable"
    """Nothing the slice holds is what the item checks (`CheckGap` says what is absent)."""


class CheckGap(StrEnum):
    """Why a review-checklist item had nothing to check."""

    NO_REQUESTS = "no_requests"
    """Scope: no per-request latency to hold to an SLA target (a trace or compile log alone)."""
    ONE_SIDE = "one_side"
    """Environment: the slice has one side only (no compile plan, or no runtime data)."""
    NO_ACTIONS = "no_actions"
    """Evidence, ownership: the slice calls for no action."""
    IN_PROCESS = "in_process"
    """Environment: the compile side is a JIT compiler's log (TORCH_TRACE): it compiled in the
    serving process, so its environment is the runtime's."""


class PitfallKind(StrEnum):
    """The known pitfalls a slice is checked for."""

    SYNTHETIC_ONLY = "synthetic_only"
    AVERAGE_ONLY = "average_only"
    PRECISION_WITHOUT_QUALITY = "precision_without_quality"
    DESCRIBED_PRECISION = "described_precision"
    """The slice's description names a precision its plans do not run."""


class IngestStatus(StrEnum):
    """What ingesting one file did."""

    INGESTED = "ingested"
    UNCHANGED = "unchanged"


class GainGap(StrEnum):
    """Why a shape's adaptation gain could not be measured."""

    NO_ADAPTED = "no_adapted"
    NO_BASELINE = "no_baseline"
    TOO_FEW = "too_few"
    NO_OTHER_PATH = "no_other_path"
    """An uncovered shape ran one path only, enough times, and no shape of comparable size
    ran the other (`adaptation.other_paths`)."""


class PredictionGap(StrEnum):
    """Why a covered shape's bucket has no prediction."""

    PLAN_STATES_NONE = "plan_states_none"
    """The compile plan lists the bucket but no whole-model cost (no __total__, no per-op)."""
    PLAN_NOT_EXPORTED = "plan_not_exported"
    """The plan that ran it (a graph built before serving) exported no compile plan at all."""
    COMPILER_LOGGED_NONE = "compiler_logged_none"
    """A compiled graph (torch.compile) whose compiler logged no runtime estimate: Inductor
    logs none without `log_tlparse`, and 0 ns (no estimate) for every op on CPU."""


class AccuracyGap(StrEnum):
    """Why no shape's compile-time prediction could be checked against a measurement."""

    NO_RUNS = "no_runs"
    """The compiler predicted its graphs (buckets) but no request ran on them: a compile log
    or a plan alone."""
    NO_PREDICTION = "no_prediction"
    """The covered shapes' buckets carry no prediction (`Accuracy.prediction_gap` says why)."""
    TOO_FEW_STATIC = "too_few_static"
    """Predicted shapes ran the plan as built fewer than `min_samples` times each."""
    NONE_COVERED = "none_covered"
    """No shape fell in a compiled bucket."""


class FallbackCause(StrEnum):
    """Why a shape's requests ran the generic path (eager, under torch.compile)."""

    RECOMPILE_LIMIT = "recompile_limit"
    """Its worker's compiler had refused a compile at the recompile limit by then: every new
    shape of that worker runs eagerly after it."""
    COMPILE_FAILED = "compile_failed"
    """A compile on its worker had failed by then."""
    UNSTATED = "unstated"
    """No compile record of its worker explains it (a graph break, a skipped frame, or a
    compile log not ingested)."""


class GainBasis(StrEnum):
    """What a shape's adaptation gain compares its path with."""

    SAME_SHAPE = "same_shape"
    """Both paths ran this shape: its adapted requests against its own baseline."""
    COMPARABLE_SHAPES = "comparable_shapes"
    """Only one path ran it: the other path's compute per element on shapes of comparable
    size (elements within a factor of 2), scaled to this shape's elements."""


class ClassBasis(StrEnum):
    """Which rule of the classification decided a shape's class."""

    TOO_FEW_REQUESTS = "too_few_requests"
    NO_DRIVER_DECIDES = "no_driver_decides"
    WEAK_EVIDENCE = "weak_evidence"
    """The largest driver's share reaches the deciding share, but its CI includes zero."""
    TIE = "tie"
    DRIVER_DECIDES = "driver_decides"
    PREDICTION_OFF = "prediction_off"
    ADAPTATION_COSTS = "adaptation_costs"
    NOTHING_FOUND = "nothing_found"
    LATENCY_NOT_MEASURED = "latency_not_measured"
    """The requests record no arrival (profiler spans): there is no latency tail to read."""
    BLOCKED_SHARE = "blocked_share"
    """Without latency: more requests started behind adaptation than a p95 tail holds."""


class FusionGap(StrEnum):
    """Why the operator-fusion effect could not be measured."""

    NO_GROUPS = "no_groups"
    NOT_BOTH_RAN = "not_both_ran"


class HistoryNote(StrEnum):
    """What limits the comparison with earlier nights."""

    FIRST_RUN = "first_run"
    BASELINE_MISSING = "baseline_missing"


class OpKind(StrEnum):
    """How an op's work is counted (and whether it runs on the matrix units)."""

    GEMM = "gemm"
    CONV = "conv"
    ATTENTION = "attention"
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    NORM = "norm"
    COPY = "copy"

    @property
    def matrix(self) -> bool:
        """Runs on the matrix units (its peak is the dtype's matrix peak)."""
        return self in (OpKind.GEMM, OpKind.CONV, OpKind.ATTENTION)


class Bound(StrEnum):
    """Which roof limits an op x shape: arithmetic intensity below the device's ridge point is
    memory-bound."""

    COMPUTE = "compute"
    MEMORY = "memory"


class Suspect(StrEnum):
    """Why an op x shape's records cannot be real, so that it gives no throughput or headroom
    (`roofline.suspect`)."""

    FASTER_THAN_DEVICE = "faster_than_device"
    """A call ran in well under the least time the device needs for its work."""
    ABSURD_WORK = "absurd_work"
    """Its dims make FLOPs or bytes beyond float range, or more bytes than a device holds."""


class DeviceActivity(StrEnum):
    """What a device was doing."""

    COMPUTE = "compute"
    COMMUNICATION = "communication"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    IDLE = "idle"


class CompareVerdict(StrEnum):
    """A compared shape's (or op's) verdict: B faster or slower than A, no change shown, or
    too few samples to test."""

    FASTER = "faster"
    SLOWER = "slower"
    SAME = "same"
    INSUFFICIENT = "insufficient"


class ShipReason(StrEnum):
    """Why a compared change is, or is not, safe to ship against the SLA."""

    NO_SLA = "no_sla"
    """No SLA target for B's slice with the evidence to judge it."""
    MISSES_SLA = "misses_sla"
    """B misses a target it has the evidence to be judged against."""
    TAIL_ROSE = "tail_rose"
    """B meets its targets, but a tail quantile rose beyond its CI."""
    SAFE = "safe"
    """B meets every target it can be judged against, and no tail quantile rose."""


class TimeBasis(StrEnum):
    """What a compared side's total time is the sum of: its device rows (kernels, copies and
    sets), or, when it has none (a CPU run, a trace of the host only), its host-side ops."""

    DEVICE = "device"
    HOST = "host"


class TimeCategory(StrEnum):
    """What a compared op x shape's time is spent on, for the split of the total."""

    GEMM = "gemm"
    CONV = "conv"
    ATTENTION = "attention"
    NORM = "norm"
    ELEMENTWISE = "elementwise"
    REDUCTION = "reduction"
    COPY = "copy"
    """Ops that move data on the device (cat, index_select, copy_ on device)."""
    TRANSFER = "transfer"
    """Calls whose device rows are all host-device copies or memsets."""
    OTHER = "other"
    """Ops the category table does not know."""
    UNATTRIBUTED = "unattributed"
    """Kernels no recorded operator launched (graph replays): named by the kernel."""


class Unranked(StrEnum):
    """Why a tuning run's workload gets no regret or no ranking figures."""

    ONE_CANDIDATE = "one_candidate"
    """Only one trial measured: there is nothing to choose between (most shipped TVM logs keep
    the best trial per workload only)."""
    NO_SUCCESS = "no_success"
    """Every trial failed: no time to choose by."""
    NO_SCORES = "no_scores"
    """The records hold no cost-model score or predicted time: the model's ranking cannot be
    judged, only the search's outcome."""


class RegretRemedy(StrEnum):
    """What the compiler lead does about a material regret (`tuning_actions.remedy`)."""

    FIX_COST_MODEL = "fix_cost_model"
    """The run's cost model is shown to rank its candidates poorly: a larger budget would be
    spent on the model's wrong picks, so the model is fixed (retrained) for that op first."""
    RETUNE = "retune"
    """The run stopped before the trial count at which the best run reached its best: retune
    with that budget."""
    PIN_BEST = "pin_best"
    """The run had the budget and still missed: pin the best measured config for the workload."""


class TuningEdge(StrEnum):
    """Which of two compared tuning runs did better, by one figure (the chosen config's time,
    or the cost model's pairwise accuracy): decided only where the interval of B against A
    excludes no change (docs/compare.md, "Tuning, compared")."""

    A_BETTER = "a_better"
    B_BETTER = "b_better"
    WITHIN_NOISE = "within_noise"
    """The interval holds no change, or rests on one measurement a side (no spread to show)."""
    UNMEASURED = "unmeasured"
    """A side lacks the figure (no score recorded, nothing to choose between)."""


class Reduction(StrEnum):
    """How an evidence pack's figure follows from its rows (`analysis/base/packs.py`)."""

    TAIL_SHARE = "tail_share"
    """A driver's share of the tail excess (`attribute`, `shares`, `resample`, `pooled`)."""
    NET_GAIN = "net_gain"
    """The net p50 gain of adaptation (`shape_gain`)."""
    APE = "ape"
    """The prediction's APE, with the signed error's CI (`shape_accuracy`)."""
    DRIFT = "drift"
    """Tonight's signed error minus the plan's first nights' (`shape_accuracy`, the same
    bootstrap, the baseline from the history)."""
    BLOCKED_SHARE = "blocked_share"
    """Requests blocked behind adaptation over ok requests (Wilson interval)."""
    ENVIRONMENT = "environment"
    """Keys whose values differ between the environment records (`check_environment`)."""
    QUEUE_CHECK = "queue_check"
    """The records' mean queue wait against the server counters' over one window
    (`telemetry.queue_check`)."""
    REGRESSION = "regression"
    """A shape's p95 change against a reference night (`p95_change`, the reference night's
    quantiles in the spec, tonight's from the rows)."""
    HEADROOM = "headroom"
    """An op x shape's time above its roofline bound over its calls, the CI by bootstrapping
    the calls' mean (`roofline.headroom_of`)."""
    DEVICE_IDLE = "device_idle"
    """The share of the devices' span idle (`timeline.of_rows`)."""
    GRAPH_PADDING = "graph_padding"
    """The padding waste of graph replays (`graphs.buckets_of`)."""
    REGRET = "regret"
    """A tuning run's chosen config over the best measured for its workload, minus 1, with the
    bootstrap interval over the candidates' repeats (`ranking.rank`)."""
    PAIRWISE_ACCURACY = "pairwise_accuracy"
    """The share of a tuning run's scored candidate pairs its cost model ranked as measured,
    with the bootstrap interval over candidates (`ranking.rank`)."""
    RECORDS = "records"
    """No figure: the records (files) whose content or absence the finding states."""
