"""Small defects of the command line that need no cluster: `render -o` onto a file, the
order of an error and the warnings that refer to it, the printed revision."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from orksync.model import short_revision
from tests.helpers import CRD, widget, write_repo

KATALOG_WITH_UNKNOWN_KEY = """
apiVersion: orkestra.orkspace.io/v1
kind: Katalog
metadata: {name: widgets}
spec:
  crds:
    widget:
      crdFile: ./crd.yaml
      operatorBoxx: {}
"""


def orksync(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=120)


def test_render_onto_a_file_is_a_usage_error_without_a_traceback(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": KATALOG_WITH_UNKNOWN_KEY.replace("operatorBoxx: {}",
                                                         "operatorBox: {}"),
        "crd.yaml": CRD, "w.yaml": widget("w")})
    target = tmp_path / "file"
    target.write_text("keep me\n")
    for out, culprit in ((target, "it is"), (target / "below", f"{target} is")):
        proc = orksync("render", str(repo), "-o", str(out))
        assert proc.returncode == 2, proc.stderr
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.stderr.strip() == (
            f"error: -o {out}: {culprit} a file, not a directory: name a directory (it is "
            "created when missing, and replaced only when it holds an earlier render)")
    assert target.read_text() == "keep me\n"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_a_warning_that_says_reported_above_comes_after_its_error(tmp_path: Path) -> None:
    repo = write_repo(tmp_path / "repo", {"katalog.yaml": KATALOG_WITH_UNKNOWN_KEY,
                                          "crd.yaml": CRD, "w.yaml": widget("w")})
    proc = orksync("validate", str(repo))
    assert proc.returncode == 1
    lines = proc.stderr.splitlines()
    error = next(i for i, line in enumerate(lines)
                 if line.startswith("error: katalog.yaml:8 ") and "operatorBoxx" in line)
    above = [i for i, line in enumerate(lines) if "reported above" in line]
    assert above and all(i > error for i in above), proc.stderr


def test_the_printed_revision_keeps_dirty() -> None:
    sha = "5d804850d91c33b2041417cbe91d40cce048c917"
    assert short_revision(sha) == "5d80485"
    assert short_revision(f"{sha}-dirty") == "5d80485-dirty"
    assert short_revision(f"{sha}-dirty", 12) == "5d804850d91c-dirty"
    assert short_revision("") == ""
