"""Test and development infrastructure. Never imported by the agent at run time."""
