"""The command line's start against its limits (issue 18, target 7): `mapreport --help` under
0.25 s and `mapreport formats` under 0.4 s, beside the bare interpreter and `import click`.

Every figure is the median wall time of fresh processes, the commands interleaved so the
machine's drift hits them alike; what each imports is listed by `python -X importtime`.

    .venv/bin/python benchmarks/startup.py --runs 21
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fleet import compile_package  # the benchmarks' shared setup

BIN = Path(sys.executable).parent
COMMANDS: dict[str, tuple[list[str], float | None]] = {
    "python -c pass": ([sys.executable, "-c", "pass"], None),
    "python -c 'import click'": ([sys.executable, "-c", "import click"], None),
    "mapreport --help": ([str(BIN / "mapreport"), "--help"], 0.25),
    "mapreport formats": ([str(BIN / "mapreport"), "formats"], 0.40),
}
"""Name -> (command, limit in seconds, None for a floor shown beside)."""


def wall(cmd: list[str]) -> float:
    """Seconds one fresh process of `cmd` takes, start to exit."""
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    """Print each command's median, range and limit."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=21)
    args = ap.parse_args()
    compile_package()
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for cmd, _ in COMMANDS.values():
        wall(cmd)  # the page cache warm for every command alike
    for _ in range(args.runs):
        for name, (cmd, _) in COMMANDS.items():
            times[name].append(wall(cmd))
    print(f"| command | median of {args.runs} | range | limit | |")
    print("|---|---:|---:|---:|---|")
    for name, (_, limit) in COMMANDS.items():
        t = times[name]
        med = statistics.median(t)
        verdict = "" if limit is None else ("met" if med < limit else "**not met**")
        shown = "" if limit is None else f"{limit:.2f} s"
        print(f"| `{name}` | {med:.3f} s | {min(t):.3f}-{max(t):.3f} s | {shown} | {verdict} |")


if __name__ == "__main__":
    main()
