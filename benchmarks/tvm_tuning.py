# mypy: disable-error-code="import-not-found, misc"
"""Make real TVM tuning records with every trial kept: tests/corpus/tvm_tuned/.

Runs Apache TVM's MetaSchedule on this machine's CPU (llvm) for small matmul and conv2d
workloads and keeps what MetaSchedule writes (`database_tuning_record.json`, every measured
candidate in the order it was measured, and `database_workload.json`), plus one companion file
MetaSchedule does not write: `database_cost_model.json`, the cost model's score of each
candidate as the search ranked it (a measure callback placed before the model's update, so
the score is the one the search used; higher is predicted faster).

Not part of the package or its tests: TVM lives in its own virtual environment.

    python3.11 -m venv /tmp/tvmenv
    /tmp/tvmenv/bin/pip install apache-tvm==0.27.0.post1 apache-tvm-ffi==0.1.14.post0 \
        xgboost cloudpickle psutil tornado
    /tmp/tvmenv/bin/python benchmarks/tvm_tuning.py tests/corpus/tvm_tuned [FOLDER ...]

Timings differ between runs and machines, so the records are not reproduced bit for bit; the
shapes, budgets, cost models and seeds are.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import tvm
from tvm import te
from tvm.ir.utils import derived_object
from tvm.s_tir import meta_schedule as ms
from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

TARGET = tvm.target.Target({"kind": "llvm", "num-cores": 2})


def matmul(n: int, m: int, k: int) -> tvm.IRModule:
    a = te.placeholder((n, k), name="A", dtype="float32")
    b = te.placeholder((k, m), name="B", dtype="float32")
    r = te.reduce_axis((0, k), name="k")
    c = te.compute((n, m), lambda i, j: te.sum(a[i, r] * b[r, j], axis=r), name="C")
    return tvm.IRModule({"main": te.create_prim_func([a, b, c])})


def conv2d(n: int, hw: int, ci: int, co: int, kk: int) -> tvm.IRModule:
    data = te.placeholder((n, hw, hw, ci), name="data", dtype="float32")
    weight = te.placeholder((kk, kk, ci, co), name="weight", dtype="float32")
    out = tvm.topi.nn.conv2d_nhwc(data, weight, 1, kk // 2, 1, out_dtype="float32")
    return tvm.IRModule({"main": te.create_prim_func([data, weight, out])})


RUNS = [
    # (folder, module, trials, cost model, LocalBuilder's timeout in s)
    ("matmul_128_xgb", lambda: matmul(128, 128, 128), 96, "xgb", 30.0),
    ("conv2d_14x14x32_xgb", lambda: conv2d(1, 14, 32, 32, 3), 48, "xgb", 30.0),
    # every build of this run timed out at the default 30 s on the loaded machine: kept as the
    # record of a run that found nothing; the next run gives each build 300 s
    ("matmul_128_random", lambda: matmul(128, 128, 128), 32, "random", 30.0),
    ("matmul_128_random_b300", lambda: matmul(128, 128, 128), 32, "random", 300.0),
]


@derived_object
class RecordScores(PyMeasureCallback):
    """Write the cost model's score of every measured candidate, before the model learns
    from them: [workload index, trial (1-based, the record's order), score, cost model]."""

    def __init__(self, model: ms.CostModel, path: Path, name: str) -> None:
        self.model, self.path, self.name, self.trial = model, path, name, 0

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):  # type: ignore[no-untyped-def]
        ctx = task_scheduler.tasks_[task_id].ctx
        scores = self.model.predict(ctx, measure_candidates)
        with self.path.open("a") as fh:
            for s in scores:
                self.trial += 1
                fh.write(json.dumps([0, self.trial, float(s), self.name]) + "\n")


def tune(out: Path, folder: str, make, trials: int, model_name: str, build_s: float) -> None:  # type: ignore[no-untyped-def]
    work = out / folder
    work.mkdir(parents=True, exist_ok=True)
    for f in work.glob("*.json"):
        f.unlink()
    if model_name == "xgb":
        model: ms.CostModel = ms.cost_model.XGBModel(num_warmup_samples=16, num_tuning_cores=2)
    else:
        model = ms.cost_model.RandomModel(seed=7)
    callbacks = [
        ms.measure_callback.AddToDatabase(),
        RecordScores(model, work / "database_cost_model.json", model_name),
        ms.measure_callback.RemoveBuildArtifact(),
        ms.measure_callback.UpdateCostModel(),
    ]
    # LocalBuilder's 30 s default is per build, measured while the machine is shared: a
    # loaded machine times every build out and the run measures nothing
    builder = ms.builder.LocalBuilder(timeout_sec=build_s)
    runner = ms.runner.LocalRunner(
        evaluator_config=ms.runner.EvaluatorConfig(number=3, repeat=3, min_repeat_ms=0)
    )
    ms.tune_tir(
        make(),
        TARGET,
        work_dir=str(work / "logs"),
        max_trials_global=trials,
        num_trials_per_iter=16,
        builder=builder,
        runner=runner,
        database=ms.database.JSONDatabase(
            path_workload=str(work / "database_workload.json"),
            path_tuning_record=str(work / "database_tuning_record.json"),
        ),
        cost_model=model,
        measure_callbacks=callbacks,
        num_tuning_cores=2,
        seed=2026,
    )


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "tests/corpus/tvm_tuned")
    only = set(sys.argv[2:])
    for folder, make, trials, model_name, build_s in RUNS:
        if not only or folder in only:
            tune(out, folder, make, trials, model_name, build_s)
            print(folder, "done", flush=True)


if __name__ == "__main__":
    main()
