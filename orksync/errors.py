"""The one exception tree of orksync.

Every message starts with its subject (a file, `file: Kind/ns/name`, or an object identity)
and carries the cause with `raise ... from err`. A message never contains a secret value.
"""

from __future__ import annotations

import re

# C0/C1 controls, DEL, line and paragraph separators, lone surrogates (undecodable file
# names): what must not reach a log line or terminal verbatim.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def printable(text: str) -> str:
    """`text` with control characters and undecodable bytes escaped (`\\x00`, `\\n`,
    `\\udcff`), so that a name taken from a repository cannot forge or break a log line."""
    return _UNPRINTABLE.sub(lambda m: m.group().encode("unicode_escape",
                                                       "backslashreplace").decode("ascii"),
                            text)


class OrksyncError(Exception):
    """Base of every error orksync raises on purpose. `exit_code` is what the CLI returns."""

    exit_code = 1

    def __init__(self, message: str, *, subject: str = "") -> None:
        self.subject = subject
        self.detail = message
        super().__init__(f"{subject}: {message}" if subject else message)


class InputError(OrksyncError):
    """Bad input in the repository: YAML, a Katalog, a CRD, a custom resource, a template.

    `location` names the file (and line where YAML gives one), `path` the field inside the
    object (`spec.crds.web.operatorBox.onCreate.deployments[0].image`). `causes`: the
    errors, reported on their own, that left this object out (the problems of its broken
    Katalog entry; the same error of the custom resource that hit it first): where the
    object's own error is read alone (its status), they are quoted instead."""

    def __init__(
        self, message: str, *, file: str = "", line: int | None = None, path: str = "",
        obj: str = "", causes: tuple[InputError, ...] = (),
    ) -> None:
        self.file = file
        self.line = line
        self.path = path
        self.obj = obj
        self.causes = causes
        where = printable(file) + (f":{line}" if line else "")
        parts = [printable(p) for p in (where, obj, path) if p]
        super().__init__(message, subject=" ".join(parts))


class LoadError(InputError):
    """A file or document that cannot be loaded (YAML syntax, unknown shape)."""


class RenderError(InputError):
    """A custom resource that cannot be rendered through its Katalog."""


class ClusterError(OrksyncError):
    """The Kubernetes API refused or failed a request. Raised only by orksync.apply."""

    def __init__(self, message: str, *, subject: str = "", status: int | None = None,
                 reason: str = "") -> None:
        self.status = status
        self.reason = reason
        super().__init__(message, subject=subject)


class LeadershipLost(OrksyncError):
    """This process no longer holds the Lease: it must not write. Not a ClusterError, so
    that no per-object handler takes it for one object's failure: it ends the whole job."""


class ControlPlaneError(OrksyncError):
    """The local test control plane could not be built or started."""


class SourceError(OrksyncError):
    """The Git source could not be fetched or checked out."""


class UsageError(OrksyncError):
    """Wrong command-line usage."""

    exit_code = 2
