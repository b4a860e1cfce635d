"""Rendering: templates, conditions, builders. Pure: no cluster (the live view is injected).
The rendered directory it writes is orksync.rendered."""
