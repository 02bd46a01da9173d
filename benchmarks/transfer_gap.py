# mypy: disable-error-code="import-not-found, misc"
"""Make a tuning record and a runtime trace of the same compiled models: tests/corpus/transfer_gap/.

Issue 55's transfer gap: does the time the autotuner measured for the config it deployed hold
when the model runs? One process compiles each model with torch.compile(mode="max-autotune")
on CPU `--repeats` times, as benchmarks/inductor_autotune.py does (candidates: Inductor's C++
GEMM template and ATen/oneDNN; frozen weights under no_grad; each compile autotunes again), so
its stderr holds the AUTOTUNE blocks (what Inductor measured per candidate, once per repeat);
then it runs the last compile of each model `--calls` times under the PyTorch profiler
(`record_shapes=True`), so the Kineto trace holds each call's kernels with their input
shapes: the production time of the deployed choice, measured in the same process, at the same
thread count, seconds after the tuning.

Not part of the package or its tests: torch lives in its own virtual environment.

    python3.11 -m venv /tmp/torchenv
    /tmp/torchenv/bin/pip install torch==2.13.0 numpy pandas
    /tmp/torchenv/bin/python benchmarks/transfer_gap.py OUT_DIR --threads 1 --calls 200 --repeats 3

writes OUT_DIR/autotune.log (stderr) and a trace per model, OUT_DIR/profile_<model>.json.gz.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import subprocess
import sys
from pathlib import Path

SHAPES = [
    # (name, batch rows, in features, out features): float32 linears
    ("linear_128x1024x1024", 128, 1024, 1024),
    ("linear_32x256x128", 32, 256, 128),
    ("linear_64x512x512", 64, 512, 512),
]


def _child(out: Path, threads: int, calls: int, repeats: int) -> None:
    import torch
    import torch._inductor.config as cfg
    from torch.profiler import ProfilerActivity, profile

    cfg.max_autotune_gemm_backends = "CPP,ATEN"
    cfg.autotune_num_choices_displayed = None  # every candidate, not the fastest ten
    cfg.freezing = True  # the C++ template needs a constant weight
    cfg.cpp.enable_kernel_profile = True  # Inductor's own C++ kernels named in the trace
    torch.set_num_threads(threads)
    torch.manual_seed(2026)
    with torch.no_grad():
        for name, m, k, n in SHAPES:
            print(f"# {name}", file=sys.stderr, flush=True)
            model = torch.nn.Linear(k, n).eval()
            x = torch.randn(m, k)
            for _ in range(repeats):  # each compile autotunes again: one more tuning repeat
                torch._dynamo.reset()
                fn = torch.compile(model, mode="max-autotune", dynamic=False)
                fn(x)  # compiles and autotunes: an AUTOTUNE block
            for _ in range(10):  # warm, as a server is before it serves
                fn(x)
            # profiled before the next model's reset, which would make this one compile (and
            # autotune) again inside the trace
            with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
                for _ in range(calls):
                    fn(x)
            trace = out / f"profile_{name}.json"
            prof.export_chrome_trace(str(trace))
            with trace.open("rb") as src, gzip.open(f"{trace}.gz", "wb", compresslevel=9) as dst:
                shutil.copyfileobj(src, dst)
            trace.unlink()


def main() -> None:
    """Run the models in a child process whose stderr is the tuning record."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3, help="compiles (autotunings) per model")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.out, args.threads, args.calls, args.repeats)
        return
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
    cmd = [sys.executable, __file__, str(args.out), "--child", "--threads", str(args.threads)]
    cmd += ["--calls", str(args.calls), "--repeats", str(args.repeats)]
    with (args.out / "autotune.log").open("wb") as err:
        subprocess.run(cmd, stderr=err, env=env, check=True)


if __name__ == "__main__":
    main()
