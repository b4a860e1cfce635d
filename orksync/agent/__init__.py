"""The in-cluster agent: scheduling, leader election, health and metrics around the
fetch → render → apply pipeline. Imperative shell; the pipeline stays pure where it was."""
