"""The seeded generators of the demo data (`make sample`)."""
