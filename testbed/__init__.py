"""Test and benchmark infrastructure, not shipped in the wheel: the local control plane,
the fault proxy, the git daemon."""
