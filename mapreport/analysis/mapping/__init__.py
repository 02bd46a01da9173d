"""How accurate the compile-time mapping was: predicted against measured cost, the plan's
coverage of shapes, the runtime files' consistency, environments and load generators."""
