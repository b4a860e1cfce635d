"""Rendering: templates, conditions, builders and the output directory. Pure: no cluster."""
