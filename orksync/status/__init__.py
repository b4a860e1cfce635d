"""The status orksync computes for a custom resource and the health of live objects by
kstatus rules, pure: lifecycle/ reads the objects and writes the result."""
