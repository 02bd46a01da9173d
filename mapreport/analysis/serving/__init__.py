"""What runtime adaptation did to requests: adaptation events, blocking, per-shape classes,
recompiles, queueing, the tail, SLAs and shape drift."""
