"""The order of things: the nightly job, ingest under the writer lock, per-slice reports and
their workers, recording the history, evidence packs, the run configuration, `check`."""
