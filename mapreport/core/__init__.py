"""Shared vocabulary: categories, errors, windows, the canonical schema, shapes, names, the
connection protocol and file writing. Imports nothing of mapreport outside this folder."""
