"""The files a load reads: the repository's walk (hidden directories and `.orksyncignore`
left out), their parse (in several processes for a large repository), and the files a
Katalog links to (`crdFile`, `crFiles`, `setup.apply`), which must stay in the repository."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from orksync.errors import LoadError
from orksync.katalog.loader.ignore import IGNORE_FILE, IgnoreRules
from orksync.katalog.loader.state import LoadState, Parsed
from orksync.yamls.doc import Document, dotted
from orksync.yamls.io import load_documents


def ignore_rules(root: Path) -> IgnoreRules:
    """The repository's `.orksyncignore`; LoadError when it exists and cannot be read."""
    path = root / IGNORE_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return IgnoreRules()
    except OSError as err:
        raise LoadError(f"cannot be read: {err.strerror or err}", file=IGNORE_FILE) from err
    try:
        return IgnoreRules(raw.decode("utf-8"))
    except UnicodeDecodeError as err:
        raise LoadError(f"not UTF-8 text (byte {err.start})", file=IGNORE_FILE) from err


# Fewer files than this per job are parsed in one process: below it a second process does
# not pay for its fork and the trip back of the documents (the load of bench/render.py's
# repositories gained nothing from a second process at this size).
MIN_FILES_PER_JOB = 256
FILES_CHUNK = 64  # files a process takes at a time (orksync.runtime.forked.fork_chunks)


def parse_all(st: LoadState, files: Sequence[Path]) -> list[Parsed]:
    """The documents of each file (resolved paths), parsed as `add_file` would: the
    part of loading that may run in parallel (only what it returns counts; in a
    forked process, nothing it changes here is seen)."""
    out: list[Parsed] = []
    for resolved in files:
        try:
            out.append([(d.index, d.content) for d in
                        load_documents(resolved, display=st.rel(resolved))])
        except LoadError as err:
            out.append(err)
    return out


def linked_file(st: LoadState, doc: Document, rel: str, fpath: list[str | int], obj: str, *,
                required: bool) -> Path | None:
    """A file a Katalog names, relative to it and inside the repository, loaded; a missing
    one is an error when `required`, else a warning (None)."""
    target = (doc.file.parent / rel).resolve()
    if not target.is_relative_to(st.root):
        raise st.error(doc, f"{rel!r} points outside the repository", fpath, obj)
    if not target.is_file():
        if required:
            raise st.error(doc, f"file {rel!r} does not exist", fpath, obj)
        st.warnings.append(f"{st.rel(doc.file)}: {obj}: {dotted(fpath)}: "
                           f"file {rel!r} does not exist (ignored)")
        return None
    st.add_file(target)
    return target
