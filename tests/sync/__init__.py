"""Tests of the sync recipe: render and apply, cleanup, what a broken input holds, plain
manifests, faults ridden out."""
