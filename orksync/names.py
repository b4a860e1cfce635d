"""Kubernetes name rules. Pure.

The checks are cached: a render checks the same label keys, API groups, versions and
namespaces for every object it builds."""

from __future__ import annotations

import functools
import re

_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")


@functools.lru_cache(maxsize=4096)
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


@functools.lru_cache(maxsize=4096)
def label_problem(name: str) -> str | None:
    """Why `name` is not a valid DNS-1123 label (namespaces, services), or None."""
    if not name:
        return "name is empty"
    if len(name) > 63 or not _DNS1123_LABEL.match(name):
        return (f"{name!r} is not a valid DNS-1123 label (at most 63 lower-case letters, "
                "digits and '-', starting and ending with a letter or digit)")
    return None


@functools.lru_cache(maxsize=4096)
def label_value_problem(value: str) -> str | None:
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        return f"label value {value[:70]!r} is not valid (at most 63 characters of [A-Za-z0-9-_.])"
    return None


@functools.lru_cache(maxsize=4096)
def label_key_problem(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and subdomain_problem(prefix):
        return f"label key {key!r} has an invalid prefix"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return f"label key {key!r} is not valid"
    return None


def kind_problem(kind: str) -> str | None:
    """Why `kind` is not a usable Kubernetes kind (a letter, then letters and digits), or
    None. Kinds name files in the rendered directory, so nothing else may pass."""
    if not kind:
        return "kind is empty"
    if len(kind) > 63 or not _KIND.match(kind):
        return f"kind {kind[:70]!r} is not valid (a letter, then at most 62 letters and digits)"
    return None


def api_version_problem(api_version: str) -> str | None:
    """Why `api_version` is not `version` or `group/version` (group a DNS-1123 subdomain,
    version a DNS-1123 label), or None."""
    group, _, version = api_version.rpartition("/")
    if not version or (group and subdomain_problem(group)) or label_problem(version):
        return (f"apiVersion {api_version[:80]!r} is not valid (version or group/version: "
                "a DNS subdomain, '/', a DNS label)")
    return None
