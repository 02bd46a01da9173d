"""Two runs compared: per shape, per op and as a whole, with their intervals and the
run-to-run rule (docs/compare.md)."""
