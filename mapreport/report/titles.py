"""Action titles, by the params they word: a kind's title is declared beside the words (or the
section) that show its figures and registered here for its params class (`titled`); `title_of`
reads it for tonight's actions and for past nights' (the history stores params, not words)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from mapreport.analysis.actions.action_params import ActionParams
from mapreport.core.kinds import ActionKind

Title = Callable[[Any, ActionKind, str, str], str]
"""A title from an action's params, kind, shape and slice name."""
T = TypeVar("T", bound=Title)

TITLES: dict[type[ActionParams], Title] = {}
"""The title of each params class (a test holds every registered class to one)."""


def titled(*params: type[ActionParams]) -> Callable[[T], T]:
    """Register a function as the title of actions stating these params."""

    def register(title: T) -> T:
        for cls in params:
            TITLES[cls] = title
        return title

    return register


def title_of(kind: ActionKind, shape: str, params: ActionParams, name: str) -> str:
    """An action's title from its kind, shape and params: tonight's, or a past night's as the
    history stored them (its facts get today's words)."""
    return TITLES[type(params)](params, kind, shape, name)
