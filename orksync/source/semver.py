"""A Sync's `ref.semver`: the highest tag that satisfies a range, as Flux's GitRepository
`ref.semver` picks it. Ranges and versions follow npm's rules (the `semantic_version`
library's NpmSpec: `>=1.0.0 <2.0.0`, `^1.2`, `~1.2.3`, `1.x`, `a || b`, `1.0.0 - 2.0.0`),
and a comma joins comparators as a blank does (`>=1.0.0, <2.0.0`, as Flux writes it); a
tag is a version with or without a leading `v` (`v1.2.0`); tags that are no version are
ignored. A prerelease satisfies a range only when the range names a prerelease of the same
major.minor.patch (npm's rule). Pure: the caller lists the tags."""

from __future__ import annotations

from collections.abc import Iterable

import semantic_version

from orksync.errors import SourceError

__all__ = ["check_range", "highest"]


def check_range(text: str) -> semantic_version.NpmSpec:
    """The range `text`; SourceError naming it when it does not parse."""
    try:
        return semantic_version.NpmSpec(" ".join(text.replace(",", " ").split()))
    except ValueError as err:
        raise SourceError(f"semver range {text!r} does not parse: {err}") from None


def version_of(tag: str) -> semantic_version.Version | None:
    """The version a tag names (`1.2.3` or `v1.2.3`), None for any other tag."""
    try:
        return semantic_version.Version(tag.removeprefix("v"))
    except ValueError:
        return None


def highest(text: str, tags: Iterable[str]) -> str | None:
    """The tag of the highest version satisfying the range `text`; of two tags of the same
    version (`1.0.0` and `v1.0.0`) the one without `v`. None when none satisfies it."""
    spec = check_range(text)
    versions: dict[semantic_version.Version, str] = {}
    for tag in tags:
        version = version_of(tag)
        if version is not None and version in spec and \
                (version not in versions or not tag.startswith("v")):
            versions[version] = tag
    return versions[max(versions)] if versions else None
