"""Tests of status: health by kstatus rules, the conditions and fields written on custom
resources."""
