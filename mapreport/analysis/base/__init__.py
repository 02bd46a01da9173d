"""The shared base of the analysis: thresholds and results' common types, statistics, the SQL
helpers every family uses, the judgement rule's types and the slice's basic counts."""
