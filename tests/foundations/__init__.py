"""Tests of the foundations every layer uses: the model, YAML, logs, durations, progress,
.orksyncignore, the GC pause."""
