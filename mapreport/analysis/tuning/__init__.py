"""Did the compiler choose the best mapping: tuning trials ranked, regret and the cost
model's ranking quality (docs/metrics.md, "Ranking and regret")."""
