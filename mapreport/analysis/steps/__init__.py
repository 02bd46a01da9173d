"""The steps that assemble one slice's result from the families, and the result itself."""
