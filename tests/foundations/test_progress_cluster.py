"""`orksync sync` and `orksync apply` on a terminal show their progress; piped, they do
not (orksync.runtime.progress), against the real control plane."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from orksync.runtime.progress import ERASE
from testbed.controlplane import ControlPlane
from tests.foundations.ptyrun import run_on_terminal
from tests.helpers import CRD, KATALOG, widget, write_repo

pytestmark = pytest.mark.cluster


def test_sync_and_apply_on_a_terminal_show_progress_and_stay_plain_in_a_pipe(
        control_plane: ControlPlane, tmp_path: Path) -> None:
    ns = f"t-{uuid.uuid4().hex[:8]}"
    repo = write_repo(tmp_path / "repo", {
        "katalog.yaml": KATALOG, "crd.yaml": CRD,
        **{f"w{i}.yaml": widget(f"w{i}", ns, image="nginx", replicas=1, port=8080)
           for i in range(3)}})
    flags = ["--kubeconfig", str(control_plane.kubeconfig), "--name", f"progress-{ns}"]

    code, _, terminal = run_on_terminal("sync", str(repo), "--once", *flags)
    assert code == 0, terminal
    assert f"{ERASE}render 3/3 custom resources (100%)" in terminal
    # 1 CRD, 3 custom resources, 6 children (and the namespace, created with them)
    assert f"{ERASE}apply 10/10 objects (100%)" in terminal
    assert f"{ERASE}created Deployment/{ns}/w0\n" in terminal  # log lines stay whole
    summary = terminal.rsplit(ERASE, 1)[1]
    assert summary.startswith("sync ") and "failed=0" in summary and summary.endswith("s\n")

    out = tmp_path / "out"
    assert run_on_terminal("render", str(repo), "-o", str(out))[0] == 0
    code, _, terminal = run_on_terminal("apply", str(out), *flags)
    assert code == 0, terminal
    assert f"{ERASE}read… " in terminal and f"{ERASE}apply 10/10 objects (100%)" in terminal

    piped = subprocess.run([sys.executable, "-m", "orksync", "sync", str(repo), "--once",
                            *flags], capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0, piped.stderr
    assert "\r" not in piped.stderr and "\x1b" not in piped.stderr
    assert piped.stderr.splitlines()[-1].startswith("sync ")
