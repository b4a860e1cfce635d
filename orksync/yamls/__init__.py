"""YAML for orksync: the deterministic emitter and the exact reader of its own output
(`io`), the safe loader with its guards (`parse`), a loaded document and the bounds every
loader checks (`doc`)."""
