"""A directory of a local repository as one of its revisions holds it, read from the git
object store: `orksync render REPO --diff-against REV` renders it beside the working tree.

gitpython reads the commit's tree and its blobs (one `git cat-file --batch` process); no
checkout, no worktree, no change to the repository's index or HEAD. `git archive` was the
other way and is not used: it honours `export-ignore` and `export-subst` attributes, so a
repository's `.gitattributes` could leave files out of the render or rewrite them.

What is written: every file under the directory, with its bytes. A symbolic link reads
what the same link in the working tree would read, at the revision: one whose target
stays inside the directory stays a relative link; one to elsewhere in the repository is
replaced by its target as the revision holds it (a file's bytes, a directory's files); one
that leaves the repository, or is absolute, links to the same path as in the working tree.
So a link never reaches into the temporary directory's surroundings. A submodule's files
are not in the repository's objects; it is skipped, with a warning.
"""

from __future__ import annotations

import logging
import os
import posixpath
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from orksync.errors import SourceError

__all__ = ["RevisionTree", "export_revision"]

log = logging.getLogger(__name__)

_SYMLINK_MODE = 0o120000


@dataclass(slots=True)
class RevisionTree:
    """What `export_revision` wrote: the full commit sha the revision resolved to, whether
    the directory existed at it, and the submodules it skipped."""

    sha: str
    existed: bool = True
    skipped: list[str] = field(default_factory=list)


def export_revision(path: Path, revision: str, dest: Path) -> RevisionTree:
    """Write the directory `path` (inside a git working tree) as `revision` holds it into
    the empty directory `dest`. Raises SourceError when `path` is not inside a git
    repository or `revision` names no commit. A directory the revision does not hold
    (added since) is written empty and reported with `existed=False`."""
    import git  # deferred: only this command reads revisions

    try:
        repo = git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError) as err:
        raise SourceError(f"{path}: not inside a git repository") from err
    try:
        if repo.working_tree_dir is None:
            raise SourceError(f"{path}: a bare repository has no working tree to compare")
        top = Path(repo.working_tree_dir).resolve()
        rel = path.resolve().relative_to(top)
        try:
            commit = repo.commit(revision)
        except (git.BadName, git.BadObject, ValueError) as err:
            raise SourceError(f"{revision!r}: no such revision in {top}") from err
        result = RevisionTree(sha=commit.hexsha)
        tree = commit.tree
        if rel.parts:
            try:
                tree = tree / PurePosixPath(*rel.parts).as_posix()
            except KeyError:
                result.existed = False
                return result
            if tree.type != "tree":
                raise SourceError(f"{rel.as_posix()}: not a directory at {revision}")
        _Writer(commit.tree, top, dest, revision, result).tree(tree, dest, depth=0)
        return result
    finally:
        repo.close()


_MAX_LINK_DEPTH = 8  # links followed through links, as the operating system bounds them


class _Writer:
    """Writes trees and blobs of one commit (`root`: its top tree) under a directory."""

    def __init__(self, root: Any, top: Path, dest: Path, revision: str,
                 result: RevisionTree) -> None:
        self.root, self.top, self.dest = root, top, dest
        self.revision, self.result = revision, result

    def tree(self, tree: Any, dest: Path, *, depth: int) -> None:
        dest.mkdir(parents=True, exist_ok=True)
        base = PurePosixPath(tree.path) if tree.path else PurePosixPath()
        for item in tree.traverse():
            inner = PurePosixPath(item.path).relative_to(base)
            target = dest.joinpath(*inner.parts)
            if item.type == "tree":
                target.mkdir(parents=True, exist_ok=True)
            elif item.type == "commit":
                self.result.skipped.append(item.path)
                log.warning("warning: %s is a submodule at %s: its files are not compared",
                            item.path, self.revision)
            elif item.type == "blob":
                self.blob(item, target, inside=base, depth=depth)

    def blob(self, item: Any, target: Path, *, inside: PurePosixPath, depth: int) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        data = item.data_stream.read()
        if item.mode & 0o170000 != _SYMLINK_MODE:
            target.write_bytes(data)
            return
        link = os.fsdecode(data)
        if os.path.isabs(link):
            os.symlink(link, target)
            return
        path = PurePosixPath(posixpath.normpath(
            posixpath.join(posixpath.dirname(item.path), link)))
        if path.parts[:1] == ("..",):  # leaves the repository: what the working tree reads
            os.symlink(os.path.normpath(self.top.joinpath(*path.parts)), target)
            return
        if inside == PurePosixPath() or path.is_relative_to(inside):
            os.symlink(link, target)  # inside the exported directory: the same link
            return
        try:
            pointed = self.root / path.as_posix() if path.parts else self.root
        except KeyError:
            # dangling at the revision: dangling here too, to a name that exists nowhere,
            # so the loader treats it as a dangling link in the working tree
            os.symlink(self.dest / ".orksync-missing-at-revision" / path.as_posix(), target)
            return
        if depth >= _MAX_LINK_DEPTH:
            raise SourceError(f"{item.path}: too many levels of symbolic links at "
                              f"{self.revision}")
        if pointed.type == "tree":
            self.tree(pointed, target, depth=depth + 1)
        elif pointed.type == "blob":
            self.blob(pointed, target, inside=inside, depth=depth + 1)
