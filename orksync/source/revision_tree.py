"""A directory of a local repository as one of its revisions holds it, read from the git
object store: `orksync render REPO --diff-against REV` renders it beside the working tree.

gitpython reads the commit's tree and its blobs (one `git cat-file --batch` process); no
checkout, no worktree, no change to the repository's index or HEAD. `git archive` was the
other way and is not used: it honours `export-ignore` and `export-subst` attributes, so a
repository's `.gitattributes` could leave files out of the render or rewrite them.

What is written: every file under the directory, with its bytes; a symbolic link as a
symbolic link to the target the revision records (the loader then treats it as it treats
one in the working tree). A submodule's files are not in the repository's objects; it is
skipped, with a warning.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

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
        for item in tree.traverse():
            if isinstance(item, tuple):  # pragma: no cover - traverse(as_edge=False) yields items
                continue
            inner = PurePosixPath(item.path).relative_to(tree.path) if tree.path else \
                PurePosixPath(item.path)
            target = dest.joinpath(*inner.parts)
            if item.type == "tree":
                target.mkdir(parents=True, exist_ok=True)
            elif item.type == "commit":
                result.skipped.append(item.path)
                log.warning("warning: %s is a submodule at %s: its files are not compared",
                            item.path, revision)
            elif item.type == "blob":
                target.parent.mkdir(parents=True, exist_ok=True)
                data = item.data_stream.read()
                if item.mode & 0o170000 == _SYMLINK_MODE:
                    os.symlink(os.fsdecode(data), target)
                else:
                    target.write_bytes(data)
        return result
    finally:
        repo.close()
