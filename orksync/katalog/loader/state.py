"""What a load has found so far (documents, errors, warnings, what is held or left out) and
how a problem is reported: `error` and `warn` name the file, line, object and field, where
a Komposer override wrote the field when one did."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from orksync.errors import InputError, LoadError, printable
from orksync.katalog.model import (
    CrdManifest,
    PlainManifest,
    Source,
)
from orksync.model import ObjRef
from orksync.yamls.doc import Document, dotted
from orksync.yamls.io import load_documents, locate

# A file's documents, as (index, content), parsed ahead (load_repository's jobs), or the
# error that stopped them
Parsed = list[tuple[int, Any]] | LoadError


class LoadState:
    """The records of one load, shared by its stages, and how they report a problem."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.errors: list[Exception] = []
        self.warnings: list[str] = []
        self.documents: list[Document] = []
        self.seen: set[Path] = set()
        self.failed = 0  # Katalogs and Katalog entries that did not load
        # (group, kind) of the Katalog entries that did not load, as far as it is known
        # ("" kind: the group only) -> why: their custom resources are held (`hold_kind`)
        self.held: dict[tuple[str, str], str] = {}
        # the same, by a name of the kind (lower case), when the repository does not tell
        # the kind of such an entry but its Katalog's text names it (`hold_kind`)
        self.held_names: dict[str, str] = {}
        self.manifests: dict[int, CrdManifest | None] = {}  # by id(document): checked once
        # (apiVersion, kind) of the entries with `enabled: false` -> why their custom
        # resources are left out
        self.disabled: dict[tuple[str, str], str] = {}
        self.left_out: list[tuple[ObjRef, str]] = []
        self.rels: dict[Path, str] = {}
        self.plain: dict[ObjRef, PlainManifest] = {}
        self.setup_files: set[Path | None] = set()  # named by an entry's setup.apply
        self.classified: set[int] = set()  # id() of the documents the walk loaded
        self.prefix = os.path.join(str(root), "")  # the root with its trailing separator
        # (imported Katalog's file, document index, entry key) -> (its Komposer's document,
        # the Komposer's name, [(flat path in the entry a Komposer override gave, where
        # the override writes it)]): a problem of such a value names the Komposer
        self.overrides: dict[tuple[Path, int, str],
                             tuple[Document, str, list[tuple[tuple[str, ...],
                                                             list[str | int]]]]] = {}

    def rel(self, path: Path) -> str:
        """`path` (resolved) as shown in messages and origins: relative to the root. Asked
        several times per file."""
        shown = self.rels.get(path)
        if shown is None:
            text = str(path)
            shown = text[len(self.prefix):] if text.startswith(self.prefix) else text
            self.rels[path] = shown
        return shown

    def add_file(self, resolved: Path, parsed: Parsed | None = None) -> None:
        """Load a file (`resolved`: its resolved path), unless loaded already; `parsed`:
        its documents, parsed ahead by `parse_all`."""
        if resolved in self.seen:
            return
        self.seen.add(resolved)
        display = self.rel(resolved)
        if printable(display) != display:
            self.errors.append(LoadError("file name is not printable UTF-8 text: refused",
                                         file=display))
            return
        try:
            if parsed is None:
                self.documents.extend(load_documents(resolved, display=display))
            elif isinstance(parsed, LoadError):
                raise parsed
            else:
                self.documents.extend(Document(file=resolved, index=i, content=content)
                                      for i, content in parsed)
        except LoadError as err:
            self.errors.append(err)

    def source(self, doc: Document) -> Source:
        return Source(file=self.rel(doc.file), path=doc.file, index=doc.index)

    def error(self, doc: Document, message: str, field: Iterable[str | int] = (),
              obj: str = "", *, as_written: bool = False) -> InputError:
        """An error about a field of `doc`; `as_written`: the field path is one of the
        document as written (a schema finding), never one a Komposer override gave."""
        fields = list(field)
        if not as_written:
            doc, fields, obj = self.written(doc, fields, obj)
        line = locate(doc.file, doc.index, fields)
        return InputError(message, file=self.rel(doc.file), line=line,
                          path=dotted(fields), obj=obj)

    def written(self, doc: Document, fields: list[str | int], obj: str
                ) -> tuple[Document, list[str | int], str]:
        """Where a field of a loaded entry is written: in its Komposer when an override
        gave its value (doc, field path, object name), else where it is."""
        if len(fields) > 3 and fields[:2] == ["spec", "crds"]:
            found = self.overrides.get((doc.file, doc.index, str(fields[2])))
            for given, where in found[2] if found else ():
                if tuple(fields[3:3 + len(given)]) == given:
                    assert found is not None
                    return found[0], [*where, *fields[3 + len(given):]], found[1]
        return doc, fields, obj

    def warn(self, doc: Document, obj: str, path: Sequence[str | int], message: str, *,
             as_written: bool = False) -> None:
        """A warning about a Katalog field: `file:line: Katalog/x: field.path: message`
        (`as_written`: as for `error`)."""
        if not as_written:
            doc, path, obj = self.written(doc, list(path), obj)
        line = locate(doc.file, doc.index, list(path))
        where = f"{self.rel(doc.file)}:{line}" if line else self.rel(doc.file)
        self.warnings.append(f"{where}: {obj}: {dotted(path)}: {message}")


def type_name(value: Any) -> str:
    """The YAML name of a value's type, for messages."""
    names = {dict: "a map", list: "a list", str: "a string", bool: "a boolean",
             int: "an integer", float: "a number", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def text_problem(value: Any, rule: Callable[[str], str | None]) -> str | None:
    """`rule`'s problem with `value`, which must be a string first."""
    if not isinstance(value, str):
        return f"must be a string, not {type_name(value)}"
    return rule(value)
