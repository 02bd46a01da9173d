# mypy: disable-error-code="import-not-found, misc"
"""Make real Inductor max-autotune records: tests/corpus/inductor_autotune/.

torch.compile(mode="max-autotune") benchmarks each GEMM's candidate kernels and writes what it
measured to stderr, one block per autotuned op (`torch/_inductor/select_algorithm.py`,
`AlgorithmSelectorCache.log_results`):

    AUTOTUNE packed_linear(32x256, 1982689x1, 128x256)
    strides: [256, 1], [1, 0], [256, 1]
    dtypes: torch.float32, torch.float32, torch.float32
      cpp_CppMicroGemmFP32Vec_0 0.0281 ms 100.0%
      _mkl_linear 0.0346 ms 81.2%
    SingleProcess AUTOTUNE benchmarking takes 3.5351 seconds and 0.0001 seconds precompiling ...

That stderr is the record this script keeps. On CPU the candidates are Inductor's C++ GEMM
template and the ATen/oneDNN kernel (`max_autotune_gemm_backends="CPP,ATEN"`); the template is
only offered for a constant weight, so the models run frozen (`freezing=True`) under
`no_grad`. Each shape is compiled `--repeats` times in one process (`torch._dynamo.reset()`
between, Inductor's caches off), so each candidate is measured once per repeat. `--load N`
runs N busy loops beside it for the whole run: autotuning measured on a loaded machine, as on
a shared CI runner.

Not part of the package or its tests: torch lives in its own virtual environment.

    python3.11 -m venv /tmp/torchenv
    /tmp/torchenv/bin/pip install torch==2.13.0 numpy pandas
    /tmp/torchenv/bin/python benchmarks/inductor_autotune.py OUT.log --threads 1 --repeats 3
    /tmp/torchenv/bin/python benchmarks/inductor_autotune.py OUT.log --shapes linear --load 1

Timings differ between runs and machines; the shapes, dtypes, thread counts and repeats do not.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

SHAPES = [
    # (name, kind, batch rows, in features, out features, dtype)
    ("linear_32x256x128", "linear", 32, 256, 128, "float32"),
    ("linear_128x1024x1024", "linear", 128, 1024, 1024, "float32"),
    ("linear_32x256x128_bf16", "linear", 32, 256, 128, "bfloat16"),
    ("bmm_4x16x64x32", "bmm", 16, 64, 32, "float32"),
]


def _child(threads: int, repeats: int, only: str) -> None:
    import torch
    import torch._inductor.config as cfg

    cfg.max_autotune_gemm_backends = "CPP,ATEN"
    cfg.autotune_num_choices_displayed = None  # every candidate, not the fastest ten
    cfg.freezing = True  # the C++ template needs a constant weight
    torch.set_num_threads(threads)
    torch.manual_seed(2026)

    class Bmm(torch.nn.Module):
        def __init__(self, k: int, n: int) -> None:
            super().__init__()
            self.register_buffer("w", torch.randn(4, k, n))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.bmm(x, self.w)

    for name, kind, m, k, n, dtype in SHAPES:
        if only and not any(name.startswith(p) for p in only.split(",")):
            continue
        dt = getattr(torch, dtype)
        if kind == "linear":
            model: torch.nn.Module = torch.nn.Linear(k, n)
            x = torch.randn(m, k)
        else:
            model, x = Bmm(k, n), torch.randn(4, m, k)
        model = model.to(dt).eval()
        for rep in range(repeats):
            torch._dynamo.reset()
            print(f"# {name} repeat {rep + 1} of {repeats}", file=sys.stderr, flush=True)
            compiled = torch.compile(model, mode="max-autotune")
            with torch.no_grad():
                compiled(x.to(dt))


def main() -> None:
    """Run the shapes in a child process whose stderr is the record file."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shapes", default="", help="name prefixes to run, comma-separated")
    ap.add_argument("--load", type=int, default=0, help="busy loops to run beside it")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args.threads, args.repeats, args.shapes)
        return
    if args.out is None:
        ap.error("the record file to write is required")
    env = {**os.environ, "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
    cmd = [sys.executable, __file__, "--child", "--threads", str(args.threads)]
    cmd += ["--repeats", str(args.repeats), "--shapes", args.shapes]
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.load)]
    try:
        with args.out.open("wb") as err:
            subprocess.run(cmd, stderr=err, env=env, check=True)
    finally:
        for p in busy:
            p.kill()
            p.wait()


if __name__ == "__main__":
    main()
