"""What the device did: FLOPs and bytes per op, the roofline, captured graphs, the device
timeline and per-operator times."""
