"""`.orksyncignore` (orksync.katalog.loader.ignore) decides as git decides for the same
patterns in a `.gitignore`: every case is checked against `git check-ignore` on real files."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orksync.katalog.loader.ignore import IgnoreRules

FILES = [
    "katalog.yaml", "crd.yaml", "apps/a.yaml", "apps/b.yml", "apps/deep/c.yaml",
    "charts/web/templates/deploy.yaml", "charts/web/values.yaml", "build/out.yaml",
    "src/build/x.yaml", "test/fixtures/f.yaml", "doc/#notes.yaml", "!bang.yaml",
    "a/b/c/d.yaml", "a/x/y/b/z.yaml", "kustomization.yaml", "sub/kustomization.yaml",
    "space .yaml", "weird[1].yaml", "data/keep.yaml", "data/drop.yaml",
]

PATTERNS = {
    "plain name anywhere": "kustomization.yaml\n",
    "anchored name": "/kustomization.yaml\n",
    "directory only": "build/\n",
    "anchored directory": "/build/\n",
    "star": "apps/*.yaml\n",
    "double star prefix": "**/templates\n",
    "double star suffix": "charts/**\n",
    "double star middle": "a/**/b\n",
    "question and class": "apps/?.y[a-m]l\n",
    "negated class": "apps/[!a].yml\n",
    "negation": "data/*\n!data/keep.yaml\n",
    "no re-include under an excluded directory": "data/\n!data/keep.yaml\n",
    "escaped hash and bang": "\\#notes.yaml\n\\!bang.yaml\n",
    "comments and blanks": "# a comment\n\n   \ntest/\n",
    "trailing blanks dropped": "crd.yaml   \n",
    "escaped trailing blank": "space\\ .yaml\n",
    "literal bracket": "weird\\[1\\].yaml\n",
    "everything but the Katalog": "*\n!katalog.yaml\n",
    "unclosed class": "apps/[a.yaml\n",
}


def git_ignored(root: Path, patterns: str) -> set[str]:
    (root / ".gitignore").write_text(patterns)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    done = subprocess.run(["git", "-C", str(root), "check-ignore", "--no-index", "--stdin",
                           "-z"], input="\0".join(FILES) + "\0", capture_output=True,
                          text=True)
    assert done.returncode in (0, 1), done.stderr  # 1: nothing ignored
    return {p for p in done.stdout.split("\0") if p}


@pytest.mark.parametrize("patterns", list(PATTERNS.values()), ids=list(PATTERNS))
def test_the_ignore_file_decides_as_git(tmp_path: Path, patterns: str) -> None:
    for rel in FILES:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("{}\n")
    expected = git_ignored(tmp_path, patterns)
    rules = IgnoreRules(patterns)
    assert {p for p in FILES if rules.ignored(p)} == expected


def test_what_the_ignore_file_lists_is_not_loaded(tmp_path: Path) -> None:
    from orksync.katalog.loader import load_repository
    from tests.helpers import CRD, KATALOG, widget, write_repo

    files = {"katalog.yaml": KATALOG, "crd.yaml": CRD,
             "apps/w.yaml": widget("w", "ns", image="nginx"),
             "apps/skip.yaml": widget("skipped", "ns", image="nginx"),
             "charts/web/templates/deploy.yaml": "kind: {{ .Values.kind }}\n: broken",
             "fixtures/x.yaml": "not: [valid"}
    repo = write_repo(tmp_path, files)
    loaded = load_repository(repo)
    assert loaded.errors  # without an ignore file the Helm template and the fixture fail
    (repo / ".orksyncignore").write_text("# not orksync's\ncharts/\n/fixtures\napps/*\n"
                                         "!apps/w.yaml\n")
    loaded = load_repository(repo)
    assert not loaded.errors, loaded.errors
    assert [cr.ref.name for cr in loaded.crs] == ["w"]
    assert len(loaded.katalogs) == 1 and len(loaded.crds) == 1


def test_an_unreadable_ignore_file_stops_the_load(tmp_path: Path) -> None:
    from orksync.errors import LoadError
    from orksync.katalog.loader import load_repository

    (tmp_path / ".orksyncignore").write_bytes(b"charts/\n\xff\xfe\n")
    with pytest.raises(LoadError, match=r"^\.orksyncignore: not UTF-8 text \(byte 8\)"):
        load_repository(tmp_path)
