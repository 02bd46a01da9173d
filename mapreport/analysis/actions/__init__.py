"""Retuning actions from the evidence: their kinds and parameters, owners, checklists and
the observation of what an action changed."""
