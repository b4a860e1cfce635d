"""Tests of generated Secrets: the planner, the PKI, the Secret builder, rotation, and that no
generated value leaks."""
