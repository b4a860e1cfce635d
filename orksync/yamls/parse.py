"""The safe loader behind orksync.yamls.io: ruamel.yaml (libyaml-backed when
ruamel.yaml.clib is present) limited to what JSON can hold, with its guards against deep,
huge and aliased documents, and the line finder for error messages. Split from
orksync.yamls.io so that reading what orksync wrote itself (the exact reader) and emitting
never import ruamel.yaml (start-up of `orksync apply`)."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.constructor import ConstructorError, DuplicateKeyError, SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import CollectionEndEvent, CollectionStartEvent, NodeEvent
from ruamel.yaml.nodes import MappingNode, ScalarNode
from ruamel.yaml.resolver import VersionedResolver

try:  # libyaml's parser, from ruamel.yaml.clib (untyped)
    from _ruamel_yaml import CParser
except ImportError:
    CParser = None

from orksync.errors import LoadError
from orksync.yamls.doc import (
    MAX_DEPTH,
    MAX_FILE_NODES,
    MAX_INT_CHARS,
    PRESCAN_CHARS,
    Document,
    _check_size,
    _could_be_deep,
    _refuse_alias_bombs,
    document_identity,
    dotted,
)


class _JsonConstructor(SafeConstructor):
    """The safe constructor, limited to values JSON can carry."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, MappingNode):
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode):
                    raise ConstructorError("while constructing a mapping", node.start_mark,
                                           "a map key must be a scalar, not a list or map",
                                           key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: Any) -> int:
        if len(str(node.value)) > MAX_INT_CHARS:
            raise ConstructorError(None, None, f"integer longer than {MAX_INT_CHARS} "
                                   "characters", node.start_mark)
        return super().construct_yaml_int(node)

    def construct_text(self, node: Any) -> str:
        return str(self.construct_scalar(node))

    def refuse(self, node: Any) -> Any:
        raise ConstructorError(None, None, f"tag {node.tag} is not supported (only what "
                               "JSON can hold)", node.start_mark)


_JsonConstructor.add_constructor("tag:yaml.org,2002:int", _JsonConstructor.construct_yaml_int)
_JsonConstructor.add_constructor("tag:yaml.org,2002:timestamp",
                                 _JsonConstructor.construct_text)
for _tag in ("binary", "set", "omap", "pairs"):
    _JsonConstructor.add_constructor(f"tag:yaml.org,2002:{_tag}", _JsonConstructor.refuse)


_LOADERS = threading.local()


def _safe_loader() -> YAML:
    """One safe loader per thread, reused: building one costs more than reading a small
    manifest (ruamel's loader is not thread-safe, hence one per thread). Only used without
    ruamel.yaml.clib; with it, `_CLoader`."""
    yaml: YAML | None = getattr(_LOADERS, "yaml", None)
    if yaml is None:
        yaml = _LOADERS.yaml = YAML(typ="safe")
        yaml.Constructor = _JsonConstructor
    return yaml


# The YAML 1.2 implicit-resolver table, built once: ruamel's libyaml-backed safe loader
# resolves every document as YAML 1.2 (it ignores a `%YAML 1.1` directive), and rebuilds
# this table for every loader it makes, that is for every file.
_RESOLVERS_12 = VersionedResolver().versioned_resolver


if CParser is not None:
    class _CLoader(CParser, _JsonConstructor, VersionedResolver):  # type: ignore[misc,unused-ignore]
        """What `YAML(typ="safe").load_all` builds for every file when ruamel.yaml.clib is
        present (libyaml's reader, scanner, parser and composer; ruamel's constructor and
        resolver), with `_JsonConstructor` and the same initialisation, but as one class
        made once instead of a new class per file (its making cost more than parsing a
        small manifest, and each left a reference cycle behind for the cyclic collector)."""

        versioned_resolver = _RESOLVERS_12
        _parser: Any
        _composer: Any
        _resolver: Any
        _constructor: Any
        loader: Any
        loadumper: Any

        def __init__(self, text: str) -> None:
            CParser.__init__(self, text)
            self._parser = self._composer = self
            _JsonConstructor.__init__(self, loader=self)
            self.allow_duplicate_keys = False  # YAML()'s default
            VersionedResolver.__init__(self, version=None, loadumper=self)

        def close(self) -> None:
            """Free libyaml's parser and drop the references the loader holds to itself,
            so that it is freed at once, without the cyclic collector."""
            self.dispose()
            self._parser = self._composer = self._resolver = self._constructor = None
            self.loader = self.loadumper = None


def _load_all(text: str) -> Generator[Any, None, None]:
    """Every document of `text`, through the safe loader."""
    if CParser is None:
        stream = _safe_loader().load_all(text)
        try:
            yield from stream
        finally:
            stream.close()  # resets the reused loader even when a document was refused
            _safe_loader().doc_infos.clear()  # one record per document, kept by ruamel
        return
    loader = _CLoader(text)
    try:
        while loader.check_data():
            yield loader.get_data()
    finally:
        loader.close()


def parse_documents(text: str, *, path: Path, display: str) -> list[Document]:
    _refuse_alias_bombs(text, display)
    docs: list[Document] = []
    stream = _load_all(text)
    try:
        if len(text) > PRESCAN_CHARS or _could_be_deep(text):
            _prescan(text, display)
        for i, content in enumerate(stream):
            if content is None:
                continue
            _check_size(content, display, i)
            docs.append(Document(file=path, index=i, content=content))
    except MarkedYAMLError as err:
        line = err.problem_mark.line + 1 if err.problem_mark else None
        problem = (err.problem or str(err)).split("\n")[0]
        obj, field = _duplicate_key_place(text, err) if isinstance(err, DuplicateKeyError) \
            else ("", "")
        raise LoadError(f"invalid YAML: {err.context + ', ' if err.context else ''}{problem}",
                        file=display, line=line, obj=obj, path=field) from err
    except YAMLError as err:
        raise LoadError(f"invalid YAML: {str(err).splitlines()[0]}", file=display) from err
    except RecursionError as err:
        raise LoadError("YAML nested too deeply", file=display) from err
    finally:
        stream.close()
    return docs


_DUPLICATE = re.compile(r'found duplicate key "(.*?)" with value')


def _duplicate_key_place(text: str, err: MarkedYAMLError) -> tuple[str, str]:
    """The object (`Kind/ns/name`) and field path of a duplicate key, found by reading the
    text again with duplicates allowed; ("", "") when that does not work out."""
    mark, key = err.context_mark, _DUPLICATE.search(err.problem or "")
    if mark is None or key is None:
        return "", ""
    try:
        loader = YAML(typ="rt")
        loader.allow_duplicate_keys = True
        for doc in loader.load_all(text):
            stack: list[tuple[Any, list[str | int]]] = [(doc, [])]
            while stack:
                node, path = stack.pop()
                lc = getattr(node, "lc", None)
                if isinstance(node, Mapping) and lc is not None and \
                        (lc.line, lc.col) == (mark.line, mark.column):
                    return document_identity(doc), dotted([*path, key.group(1)])
                items = node.items() if isinstance(node, Mapping) else \
                    enumerate(node) if isinstance(node, list) else ()
                stack.extend((v, [*path, k]) for k, v in items)
    except Exception:  # only decorates the message
        pass
    return "", ""


def _prescan(text: str, display: str) -> None:
    """Walk the parser's events (iterative, streaming) and refuse nesting deeper than
    MAX_DEPTH or more than MAX_FILE_NODES nodes before the composer sees them: the C
    composer recurses per level (a deep file would end the process with a segmentation
    fault, not a Python error) and holds every node of a document in memory."""
    depth = nodes = 0
    for event in YAML(typ="safe").parse(text):  # its own parser: nothing shared is left mid-way
        if isinstance(event, CollectionEndEvent):
            depth -= 1
            continue
        if not isinstance(event, NodeEvent):
            continue
        nodes += 1
        if isinstance(event, CollectionStartEvent):
            depth += 1
        if depth > MAX_DEPTH or nodes > MAX_FILE_NODES:
            line = event.start_mark.line + 1 if event.start_mark else None
            problem = f"nested deeper than {MAX_DEPTH} levels" if depth > MAX_DEPTH else \
                f"more than {MAX_FILE_NODES:,} YAML nodes in one file"
            raise LoadError(problem, file=display, line=line)


def locate(path: Path, doc_index: int, field_path: Sequence[str | int]) -> int | None:
    """The 1-based line of a field inside a document, or of the nearest parent found.

    Only used to decorate error messages, so it never raises."""
    return locator(path, doc_index)(field_path)


def locator(path: Path, doc_index: int) -> Callable[[Sequence[str | int]], int | None]:
    """`locate` for many fields of one document: the file is read and parsed once."""
    try:
        rt = YAML(typ="rt")
        document: Any = list(rt.load_all(path.read_text(encoding="utf-8")))[doc_index]
    except Exception:
        return lambda field_path: None
    return lambda field_path: _line_of(document, field_path)


def _line_of(document: Any, field_path: Sequence[str | int]) -> int | None:
    try:
        node: Any = document
        line: int | None = node.lc.line + 1 if hasattr(node, "lc") else None
        for key in field_path:
            marks: Any = getattr(node, "lc", None)  # ruamel's line/column records
            if isinstance(node, Mapping) and key in node:
                line = marks.key(key)[0] + 1
            elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
                line = marks.item(key)[0] + 1
            else:
                break
            node = node[key]
        return line
    except Exception:
        return None
