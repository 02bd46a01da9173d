# mypy: disable-error-code="import-not-found, no-untyped-def, untyped-decorator"
"""Write Triton autotune cache files (`<kernel>.autotune.json`) with Triton's own code:
tests/corpus/triton_autotune/.

Triton (3.4 on) caches an autotuning's timings when a kernel is autotuned with
`cache_results=True` (or TRITON_CACHE_AUTOTUNING=1): `Autotuner.check_disk_cache` writes one
JSON file per kernel and tuning key under TRITON_CACHE_DIR, in a folder named by a hash of
Triton's version, the GPU target, the kernel's source, the environment, the key and the config
list. Measuring the configs needs a GPU, and this machine has none. So the script runs
Triton 3.8.0's own `check_disk_cache` on the CPU with two stand-ins: the driver reports an
H100's target (`GPUTarget("cuda", 90, 32)`, which the folder's hash includes), and the
benchmark that would time each config on the GPU sets the timings listed below instead. The
files' names, folders, layout and bytes are Triton's; the timings are not measurements.

Not part of the package or its tests: Triton lives in its own virtual environment.

    python3.11 -m venv /tmp/tritonenv
    /tmp/tritonenv/bin/pip install --no-deps triton==3.8.0
    /tmp/tritonenv/bin/python benchmarks/triton_autotune_cache.py tests/corpus/triton_autotune
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

INF = float("inf")
CONFIGS = [
    # (kwargs, num_warps, num_stages): a matmul's usual tile sweep
    ({"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "GROUP_M": 8}, 8, 3),
    ({"BLOCK_M": 64, "BLOCK_N": 256, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
    ({"BLOCK_M": 256, "BLOCK_N": 128, "BLOCK_K": 128, "GROUP_M": 8}, 8, 5),
    ({"BLOCK_M": 64, "BLOCK_N": 128, "BLOCK_K": 32, "GROUP_M": 8}, 4, 4),
]
RUNS = {
    # folder (one TRITON_CACHE_DIR each) -> (M, N, K) -> each config's [p50, p20, p80] in ms,
    # as Autotuner._bench returns them (do_bench's quantiles 0.5, 0.2, 0.8); [inf] * 3 is
    # what _bench returns for a config that failed (OutOfResources: config 5's shared memory)
    "machine_a": {
        (4096, 4096, 4096): [
            [0.2106, 0.2089, 0.2131],
            [0.1912, 0.1897, 0.1940],
            [0.1878, 0.1862, 0.1903],
            [0.2240, 0.2218, 0.2275],
            [INF, INF, INF],
            [0.2015, 0.1996, 0.2048],
        ],
        (512, 512, 512): [
            [0.0148, 0.0144, 0.0153],
            [0.0121, 0.0118, 0.0126],
            [0.0109, 0.0106, 0.0113],
            [0.0102, 0.0099, 0.0106],
            [INF, INF, INF],
            [0.0097, 0.0095, 0.0101],
        ],
    },
    "machine_b": {
        (4096, 4096, 4096): [
            [0.2093, 0.2077, 0.2118],
            [0.1869, 0.1851, 0.1892],
            [0.1924, 0.1905, 0.1951],
            [0.2231, 0.2210, 0.2262],
            [INF, INF, INF],
            [0.2002, 0.1985, 0.2031],
        ],
    },
}
DTYPES = ("torch.float16", "torch.float16", "torch.float16")
"""What Autotuner.run appends to the key values: str(arg.dtype) of each tensor argument."""


def write(out: Path) -> None:
    """One TRITON_CACHE_DIR per run folder, each key's file written by check_disk_cache."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.runtime.driver import driver

    class H100:
        """All check_disk_cache asks of the driver: the target its cache key hashes."""

        def get_current_target(self):
            return GPUTarget("cuda", 90, 32)

    driver.set_active(H100())
    configs = [triton.Config(kw, num_warps=w, num_stages=s) for kw, w, s in CONFIGS]

    @triton.autotune(configs=configs, key=["M", "N", "K"], cache_results=True)
    @triton.jit
    def matmul_kernel(a, b, c, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):  # fmt: skip
        pid = tl.program_id(0)
        tiles_n = tl.cdiv(N, BLOCK_N)
        group = pid // (GROUP_M * tiles_n)
        pm = group * GROUP_M + (pid % GROUP_M)
        pn = (pid % (GROUP_M * tiles_n)) // GROUP_M
        rm = pm * BLOCK_M + tl.arange(0, BLOCK_M)
        rn = pn * BLOCK_N + tl.arange(0, BLOCK_N)
        rk = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k in range(0, tl.cdiv(K, BLOCK_K)):
            x = tl.load(a + rm[:, None] * K + (k * BLOCK_K + rk)[None, :])
            y = tl.load(b + (k * BLOCK_K + rk)[:, None] * N + rn[None, :])
            acc = tl.dot(x, y, acc)
        tl.store(c + rm[:, None] * N + rn[None, :], acc.to(tl.float16))

    for folder, keys in RUNS.items():
        os.environ["TRITON_CACHE_DIR"] = str(out / folder)  # Triton's knob reads it per file
        for mnk, timings in keys.items():
            tuner = matmul_kernel
            tuner.cache.clear()

            def bench(tuner=tuner, timings=timings):
                tuner.configs_timings = dict(zip(tuner.configs, timings, strict=True))

            tuner.check_disk_cache((*mnk, *DTYPES), tuner.configs, bench)


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/corpus/triton_autotune"))
