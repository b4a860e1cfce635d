"""Kubernetes name rules. Pure."""

from __future__ import annotations

import re

_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def subdomain_problem(name: str) -> str | None:
    """Why `name` is not a valid object name (DNS-1123 subdomain), or None."""
    if not name:
        return "name is empty"
    if len(name) > 253:
        return f"name {name[:40]!r}... is longer than 253 characters"
    if not _DNS1123_SUBDOMAIN.match(name):
        return (f"name {name!r} is not a valid Kubernetes name (lower-case letters, digits, "
                "'-' and '.', starting and ending with a letter or digit)")
    return None


def label_problem(name: str) -> str | None:
    """Why `name` is not a valid DNS-1123 label (namespaces, services), or None."""
    if not name:
        return "name is empty"
    if len(name) > 63 or not _DNS1123_LABEL.match(name):
        return (f"{name!r} is not a valid DNS-1123 label (at most 63 lower-case letters, "
                "digits and '-', starting and ending with a letter or digit)")
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return f"label value {value[:70]!r} is not valid (at most 63 characters of [A-Za-z0-9-_.])"
    return None


def label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and subdomain_problem(prefix):
        return f"label key {key!r} has an invalid prefix"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return f"label key {key!r} is not valid"
    return None
