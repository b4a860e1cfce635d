"""Where a repository comes from. The only package importing `git` (gitpython)."""

from __future__ import annotations

from pathlib import Path


def local_revision(path: Path) -> str:
    """The commit a local working tree is at (`<sha>-dirty` with uncommitted changes), or
    "" when the path is not inside a git repository."""
    import git  # deferred: rendering a plain directory never needs git

    try:
        repo = git.Repo(path, search_parent_directories=True)
        sha = repo.head.commit.hexsha
    except (git.InvalidGitRepositoryError, git.NoSuchPathError, ValueError):
        return ""
    dirty = repo.is_dirty(untracked_files=True, path=str(path.resolve()))
    return f"{sha}-dirty" if dirty else sha
