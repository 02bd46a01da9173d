"""Retuning actions from the evidence: their kinds and parameters, owners, checklists and
the observation of what an action changed.

The modules whose kinds declare their params are imported here, so every params class is
registered (`action_params.ActionParams.REGISTERED`) wherever an action is read back."""

from mapreport.analysis.actions import compile_actions, device_actions, tuning_actions

__all__ = ["compile_actions", "device_actions", "tuning_actions"]
