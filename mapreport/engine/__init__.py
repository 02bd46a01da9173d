"""Where the SQL runs: DuckDB in this process, or Spark (the same SQL transpiled)."""
