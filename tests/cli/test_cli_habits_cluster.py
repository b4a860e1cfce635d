"""The command line's habits against the real control plane, as a user types them
(`python -m orksync`): global flags before the command, `sync REPO` without `--once`,
`-n`/`-A` on status, tree and diff, `diff -o json`, `status --name` of a root that does
not exist, colour on a terminal only."""

from __future__ import annotations

import base64
import json
import os
import pty
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import CONTEXT_NAME, ControlPlane
from tests.cli.test_cli_cluster import SECRET_KATALOG
from tests.helpers import CRD, ROOT, widget, write_repo

pytestmark = pytest.mark.cluster

ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "orksync", *args], capture_output=True,
                          text=True, timeout=120, env=_env())


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **extra}
    env.pop("NO_COLOR", None)
    env.update(extra)
    return env


def on_terminal(*args: str, **env: str) -> tuple[int, str]:
    """(exit code, what a terminal showed on stdout) of `python -m orksync args`."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "orksync", *args], stdout=slave,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                            env=_env(TERM="xterm", **env))
    os.close(slave)
    chunks = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the process closed its end
                break
            if not data:
                break
            chunks.append(data)
        code = proc.wait(timeout=120)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, b"".join(chunks).decode().replace("\r\n", "\n")


class Synced:
    """A repository with a Widget in each of two namespaces (each with a Deployment and a
    Secret holding a generated password), synced."""

    def __init__(self, control_plane: ControlPlane, tmp_path: Path) -> None:
        suffix = uuid.uuid4().hex[:8]
        self.ns1, self.ns2, self.name = f"a-{suffix}", f"b-{suffix}", f"habits-{suffix}"
        self.kc = str(control_plane.kubeconfig)
        self.repo = write_repo(tmp_path / "repo", {
            "katalog.yaml": SECRET_KATALOG, "crd.yaml": CRD,
            "w1.yaml": widget("w1", self.ns1), "w2.yaml": widget("w2", self.ns2)})
        first = run("sync", str(self.repo), "--once", "--kubeconfig", self.kc, "--name",
                    self.name)
        assert first.returncode == 0, first.stderr
        kube = Kube.from_kubeconfig(control_plane.kubeconfig)
        try:
            self.passwords = [base64.b64decode(kube.get(kube.resource("v1", "Secret"), ns,
                                                        f"{w}-credentials")["data"]
                                               ["password"]).decode()
                              for ns, w in ((self.ns1, "w1"), (self.ns2, "w2"))]
        finally:
            kube.close()


@pytest.fixture
def synced(control_plane: ControlPlane, tmp_path: Path) -> Iterator[Synced]:
    yield Synced(control_plane, tmp_path)


def test_sync_without_once_and_global_flags_before_the_command(synced: Synced) -> None:
    again = run("--kubeconfig", synced.kc, "--context", CONTEXT_NAME, "sync",
                str(synced.repo), "--name", synced.name)
    assert again.returncode == 0, again.stderr
    assert "created=0" in again.stderr.splitlines()[-1]
    once = run("sync", str(synced.repo), "--once", "--name", synced.name,
               "--kubeconfig", synced.kc)
    assert once.returncode == 0, once.stderr
    wrong = run("--kubeconfig", synced.kc, "--context", "no-such-context", "status")
    assert wrong.returncode != 0 and "no-such-context" in wrong.stderr


def test_status_and_tree_namespace_flags(synced: Synced) -> None:
    def objects(*flags: str) -> set[str]:
        result = run("status", "--kubeconfig", synced.kc, "--name", synced.name, "-o", "json",
                     *flags)
        assert result.returncode == 0, result.stderr
        return {f"{i['namespace']}/{i['name']}" for i in json.loads(result.stdout)["items"]}

    both = {f"{synced.ns1}/w1", f"{synced.ns2}/w2"}
    assert objects() == both and objects("-A") == both
    assert objects("-n", synced.ns1) == {f"{synced.ns1}/w1"}
    assert objects("--namespace", synced.ns2) == {f"{synced.ns2}/w2"}
    table = run("status", "--kubeconfig", synced.kc, "--name", synced.name, "-n", "nowhere")
    assert table.returncode == 0 and "in namespace nowhere" in table.stdout
    tree = run("tree", "--kubeconfig", synced.kc, "Widget/w1", "-n", synced.ns1, "-o", "json")
    assert tree.returncode == 0, tree.stderr
    assert {c["name"] for c in json.loads(tree.stdout)["children"]} >= {"w1",
                                                                        "w1-credentials"}
    clash = run("tree", "--kubeconfig", synced.kc, f"Widget/{synced.ns2}/w2", "-n",
                synced.ns1)
    assert clash.returncode == 2 and f"-n says {synced.ns1}" in clash.stderr


def test_status_of_a_sync_root_that_does_not_exist_names_those_that_do(
        synced: Synced) -> None:
    result = run("status", "--kubeconfig", synced.kc, "--name", "nope")
    assert result.returncode == 1
    assert "no sync root named nope" in result.stderr and synced.name in result.stderr
    assert result.stdout == ""


def test_diff_json_lists_each_change_with_its_action_secrets_masked(synced: Synced) -> None:
    write_repo(synced.repo, {
        "katalog.yaml": SECRET_KATALOG.replace("image: nginx", "image: nginx:1.27"),
        "w3.yaml": widget("w3", synced.ns1)})
    (synced.repo / "w2.yaml").unlink()
    result = run("diff", "--kubeconfig", synced.kc, str(synced.repo), "--name", synced.name,
                 "-o", "json")
    assert result.returncode == 1, result.stderr
    doc = json.loads(result.stdout)
    actions = {c["object"]: c["action"] for c in doc["changes"]}
    assert actions[f"Deployment/{synced.ns1}/w1"] == "changed"
    assert actions[f"Deployment/{synced.ns1}/w3"] == "created"
    assert actions[f"Secret/{synced.ns1}/w3-credentials"] == "created"
    assert actions[f"Widget.test.orksync.io/{synced.ns2}/w2"] == "deleted"
    assert actions[f"Secret/{synced.ns2}/w2-credentials"] == "deleted"
    assert doc["summary"]["deleted"] >= 2 and doc["errors"] == []
    deleted_secret = next(c["diff"] for c in doc["changes"]
                          if c["object"] == f"Secret/{synced.ns2}/w2-credentials")
    assert 'password: "***"' in deleted_secret
    for password in synced.passwords:
        assert password not in result.stdout + result.stderr
    assert "<generate:" not in result.stdout + result.stderr
    only = run("diff", "--kubeconfig", synced.kc, str(synced.repo), "--name", synced.name,
               "-o", "json", "-n", synced.ns2)
    assert only.returncode == 1, only.stderr
    assert {c["namespace"] for c in json.loads(only.stdout)["changes"]} == {synced.ns2}
    elsewhere = run("diff", "--kubeconfig", synced.kc, str(synced.repo), "--name",
                    synced.name, "-n", "nowhere")
    assert (elsewhere.returncode, elsewhere.stdout) == (0, ""), elsewhere.stderr


def test_colour_on_a_terminal_only(synced: Synced) -> None:
    status = ("status", "--kubeconfig", synced.kc, "--name", synced.name)
    code, shown = on_terminal(*status)
    assert code == 0 and ESCAPE.search(shown), shown
    assert "w1" in ESCAPE.sub("", shown)
    code, plain = on_terminal(*status, NO_COLOR="1")
    assert code == 0 and "w1" in plain and not ESCAPE.search(plain)
    piped = run(*status)
    assert piped.returncode == 0 and not ESCAPE.search(piped.stdout)
    write_repo(synced.repo, {"katalog.yaml": SECRET_KATALOG.replace("image: nginx",
                                                                    "image: nginx:1.27")})
    diff = ("diff", "--kubeconfig", synced.kc, str(synced.repo), "--name", synced.name)
    code, shown = on_terminal(*diff)
    assert code == 1 and "\x1b[32m+        image: nginx:1.27\x1b[0m" in shown, shown
    code, plain = on_terminal(*diff, NO_COLOR="1")
    assert code == 1 and "+        image: nginx:1.27\n" in plain and not ESCAPE.search(plain)
    piped = run(*diff)
    assert piped.returncode == 1 and not ESCAPE.search(piped.stdout)
