"""Tests of the applier: comparison, dry run, diff, prune and the inventory, every template key
and the semantics matrix, impersonation, deletion protection."""
