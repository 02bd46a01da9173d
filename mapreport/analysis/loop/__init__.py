"""The loop across nights: targets, the action ledger's verification and the history of
stored results."""
