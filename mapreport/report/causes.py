"""Words for causes that cross shapes and for what to collect next: the blocking finding's
remedies and adaptations, shape lists, the profiling list (`mapreport.report.words` holds the
rest; a completeness test checks every enum member has its words)."""

from __future__ import annotations

from mapreport.analysis.actions.action_params import Dim
from mapreport.core.kinds import BlockingRemedy
from mapreport.report.filters import plural

REMEDIES: dict[BlockingRemedy, str] = {
    BlockingRemedy.PRECOMPILE_IN_WARMUP: "pre-compile {them} in the server's warm-up: no "
    "earlier request of {it} had run when it adapted",
    BlockingRemedy.COMPILE_ASYNC: "compile new shapes off the serving path and serve them on the "
    "generic path until their compile lands: {n} new shapes adapted, too many to warm up",
    BlockingRemedy.MARK_DYNAMIC: "mark {dims} dynamic (or raise the recompile or cache limit "
    "that evicted the compiled shape): {why}",
    BlockingRemedy.COVER_IN_PLAN: "compile mappings for {them}: their requests held the "
    "worker on the generic fallback path",
    BlockingRemedy.RAISE_RECOMPILE_LIMIT: "raise the recompile limit "
    "(torch._dynamo.config.recompile_limit) or bucket {dims} (pad to a few sizes, or "
    "mark dynamic): the compiler reached its limit and {them} ran eagerly; "
    "pre-compiling in warm-up cannot help, as warm-up compiles count against the same limit",
}
"""How a blocking action's remedy reads, from its adapting shapes and the dims that varied."""


def dims_text(dims: tuple[Dim, ...]) -> str:
    """The dims that varied, as a remedy names them: `dim 0 of args[0] (sizes 1 to 8 seen)`."""
    if not dims:
        return "the dimension that varies"
    return " and ".join(
        f"dim {d.dim} of {d.tensor} (sizes {d.low:,} to {d.high:,} seen)" for d in dims
    )


ADAPTATION_NOUNS: dict[str, tuple[str, str]] = {
    "recompile": ("recompile", "recompiles"),
    "retune": ("re-tune", "re-tunes"),
    "remap": ("re-map", "re-maps"),
    "fallback_enter": ("fallback run", "fallback runs"),
    "fallback": ("fallback run", "fallback runs"),
    "compile_failed": ("failed compile", "failed compiles"),
    "compile_cache_hit": (
        "recompile served from the FX graph cache",
        "recompiles served from the FX graph cache",
    ),
    "compile_limit_hit": (
        "compile refused at the recompile limit",
        "compiles refused at the recompile limit",
    ),
}
"""An adaptation event (or the fallback variant) as a noun: one, several."""


def adaptation(how: str) -> str:
    """One adaptation event (or the fallback variant) as a noun."""
    return ADAPTATION_NOUNS.get(how, (how, how))[0]


def adaptations(hows: tuple[str, ...], n: int) -> str:
    """`4 recompiles`; of several kinds, `7 adapting requests (recompiles and fallback
    runs)`: n adapting requests by what they ran."""
    if not hows:
        return plural(n, "adaptation")
    if len(hows) == 1:
        return f"{n:,} " + ADAPTATION_NOUNS.get(hows[0], (hows[0], hows[0]))[0 if n == 1 else 1]
    nouns = [ADAPTATION_NOUNS.get(h, (h, h))[1] for h in hows]
    return f"{n:,} adapting requests ({', '.join(nouns[:-1])} and {nouns[-1]})"


def shape_list(shapes: tuple[str, ...], most: int = 4) -> str:
    """Shapes named in a sentence: the first `most`, then how many more."""
    named = ", ".join(shapes[:most])
    rest = len(shapes) - most
    return named + (f" and {rest} more" if rest > 0 else "")
