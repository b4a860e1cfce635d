"""docs/quickstart.md runs as written: every ```sh block, in order, in one bash session on a
control plane of its own, with the variables the page asks the reader to set (KUBECONFIG,
IMAGE, REPO_URL served by a git daemon, AGENT, HOOK_TOKEN). Each block follows an HTML
comment `<!-- step: NAME -->`; the test holds one check per step and refuses a page
whose steps differ from its checks, so a new block cannot go unchecked. Blocks of any
other language (```console, ```yaml) are not run."""

from __future__ import annotations

import base64
import contextlib
import os
import re
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from orksync.cluster.kube import Kube
from testbed.controlplane import ControlPlane
from testbed.gitdaemon import GitDaemon, free_port
from tests.helpers import ROOT

pytestmark = pytest.mark.cluster

PAGE = ROOT / "docs" / "quickstart.md"
STEP = re.compile(r"<!-- step: ([a-z0-9-]+) -->\n```sh\n(.*?)```\n", re.DOTALL)
MARK = "@@quickstart-step {}@@"


def steps(text: str) -> list[tuple[str, str]]:
    """The page's run blocks as (step, script); a ```sh block without its step comment is
    an error, as it would otherwise be run by no one."""
    found = [(m[1], m[2]) for m in STEP.finditer(text)]
    assert text.count("```sh\n") == len(found), "a ```sh block lacks its <!-- step: --> comment"
    return found


def test_the_page_s_run_blocks_are_found_and_each_one_is_named() -> None:
    text = PAGE.read_text()
    assert [name for name, _ in steps(text)] == list(CHECKS)
    with pytest.raises(AssertionError, match="step"):
        steps(text + "\n```sh\necho unchecked\n```\n")


def test_examples_quickstart_holds_the_files_the_page_writes() -> None:
    """examples/quickstart is the repository as the page leaves it: the last content the
    page writes to each file (`cat > FILE <<'EOF'`), and no other file."""
    written = {m[1]: m[2] for m in re.finditer(r"cat > (\S+) <<'EOF'\n(.*?)^EOF$",
                                               PAGE.read_text(), re.DOTALL | re.MULTILINE)}
    assert set(written) == {"namespace.yaml", "crd.yaml", "katalog.yaml", "hello.yaml"}
    example = ROOT / "examples" / "quickstart"
    assert {p.name for p in example.glob("*.yaml")} == set(written)
    for name, body in written.items():
        assert (example / name).read_text() == body, name


def split(output: str) -> dict[str, str]:
    """The session's output cut at the step marks, by step."""
    parts = re.split(r"^@@quickstart-step ([a-z0-9-]+)@@$", output, flags=re.MULTILINE)
    return {parts[i]: parts[i + 1].lstrip("\n") for i in range(1, len(parts) - 1, 2)}


def check_install(out: str, env: dict[str, str]) -> None:
    assert "created CustomResourceDefinition/syncs.orksync.io" in out
    assert "created Deployment/orksync-system/orksync" in out


def check_grant(out: str, env: dict[str, str]) -> None:
    assert "clusterrolebinding.rbac.authorization.k8s.io/orksync-quickstart created" in out


def check_sync(out: str, env: dict[str, str]) -> None:
    assert "sync.orksync.io/quickstart condition met" in out


def check_status(out: str, env: dict[str, str]) -> None:
    assert "orksync-system/quickstart" in out
    assert env["REPO_URL"] in out
    assert re.search(r"Namespace\S*\s.*quickstart", out), out


def check_validate(out: str, env: dict[str, str]) -> None:
    # the Namespace, the CRD, the Website and its Deployment and Service
    assert "validate objects=5 errors=0 warnings=0" in out, out


def check_webhook(out: str, env: dict[str, str]) -> None:
    assert out.splitlines()[0].strip() == "202", out
    assert "condition met" in out


def check_tree(out: str, env: dict[str, str]) -> None:
    assert "Website" in out and "hello" in out
    assert "Deployment" in out and "Service" in out


def check_diff(out: str, env: dict[str, str]) -> None:
    # as the Sync syncs: only the new Secret and the Deployment's variable differ, not the
    # inventory annotation and label of every object
    assert "differ=2 refused=0 errors=0" in out, out
    assert "+++ b/Secret/quickstart/hello-db\n# new object" in out, out
    assert "+        - name: DB_PASSWORD" in out


def check_reconcile(out: str, env: dict[str, str]) -> None:
    assert "password:" in out and "24 bytes" in out, out


def check_cleanup(out: str, env: dict[str, str]) -> None:
    assert 'sync.orksync.io "quickstart" deleted' in out
    # the Namespace it applied is pruned with the rest
    assert out.rstrip().endswith("Terminating") or "NotFound" in out, out


def nothing(out: str, env: dict[str, str]) -> None:
    assert "error" not in out.lower(), out


CHECKS: dict[str, Callable[[str, dict[str, str]], None]] = {
    "install": check_install, "grant": check_grant,
    "local-agent": nothing, "first-commit": nothing, "sync": check_sync,
    "status": check_status, "crd": nothing, "katalog": nothing, "website": check_validate,
    "second-commit": nothing, "webhook": check_webhook, "tree": check_tree,
    "secret": nothing, "diff": check_diff, "reconcile": check_reconcile,
    "cleanup": check_cleanup,
}


@pytest.fixture
def own_plane(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """A control plane of its own, with kube-controller-manager (the namespace and garbage
    collectors the cleanup needs): the page installs the cluster-wide RBAC and CRDs."""
    with ControlPlane(bin_dir=control_plane.bin_dir, controller_manager=True) as cp:
        yield cp


def test_the_quickstart_runs_as_written(own_plane: ControlPlane, tmp_path: Path) -> None:
    served = tmp_path / "served"
    bare = served / "quickstart.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(bare)], check=True)
    # the git daemon accepts pushes to this one repository, as a Git server would
    subprocess.run(["git", "-C", str(bare), "config", "daemon.receivepack", "true"], check=True)
    work = tmp_path / "home"
    work.mkdir()
    password_file = tmp_path / "password.b64"
    # test machinery between the page's steps, not part of the page: the generated value,
    # to prove it appears nowhere in the session's output
    after = {"reconcile": "kubectl -n quickstart get secret hello-db "
                          f"-o jsonpath='{{.data.password}}' > {password_file}\n"}
    script = "set -euo pipefail\n" + "".join(
        f"echo '{MARK.format(name)}'\n{block}{after.get(name, '')}"
        for name, block in steps(PAGE.read_text()))
    with GitDaemon(served) as daemon:
        env = {"PATH": f"{own_plane.bin_dir}:{Path(sys.executable).parent}:{os.environ['PATH']}",
               "HOME": str(work), "PYTHONPATH": str(ROOT), "NO_COLOR": "1",
               "KUBECONFIG": str(own_plane.kubeconfig), "REPO_URL": daemon.url("quickstart.git"),
               "IMAGE": "orksync:0.1.0", "AGENT": f"127.0.0.1:{free_port()}",
               "HOOK_TOKEN": secrets.token_hex(20),
               "GIT_AUTHOR_NAME": "Quick Start", "GIT_AUTHOR_EMAIL": "q@example.com",
               "GIT_COMMITTER_NAME": "Quick Start", "GIT_COMMITTER_EMAIL": "q@example.com"}
        session = subprocess.Popen(["bash", "-c", script], cwd=work, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   start_new_session=True)
        try:
            output, _ = session.communicate(timeout=600)
        finally:
            # the agent the page starts in the background is in the session's group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(session.pid, signal.SIGKILL)
            session.wait(30)
    agent_log = (work / "agent.log").read_text() if (work / "agent.log").exists() else ""
    assert session.returncode == 0, f"{output}\n--- agent.log ---\n{agent_log[-4000:]}"
    outputs = split(output)
    assert list(outputs) == list(CHECKS), output
    print(output)  # shown when a check fails
    for name, check in CHECKS.items():
        check(outputs[name], env)
    password = base64.b64decode(password_file.read_text()).decode()
    assert len(password) == 24
    assert password not in output and password not in agent_log
    assert env["HOOK_TOKEN"] not in agent_log

    # `diff --sync` names a Sync that is not there, or a malformed one, as an error
    for target, said in (("orksync-system/nope", "--sync orksync-system/nope: no such Sync"),
                         ("nope", "--sync nope: expected NAMESPACE/NAME")):
        wrong = subprocess.run(["orksync", "diff", "quickstart", "--sync", target],
                               cwd=work, env=env, capture_output=True, text=True, timeout=120,
                               check=False)
        assert wrong.returncode == 2 and said in wrong.stderr, wrong.stderr

    # the cleanup pruned what the Sync applied; the CRD stays
    kube = Kube.from_kubeconfig(own_plane.kubeconfig)
    try:
        # the installed agent: the page's image, serving Sync objects (no repository of its own)
        deployment = kube.get(kube.resource("apps/v1", "Deployment"), "orksync-system", "orksync")
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        assert container["image"] == env["IMAGE"]
        assert not {"ORKSYNC_REPO_URL", "ORKSYNC_REF", "ORKSYNC_PATH"} & \
            {e["name"] for e in container["env"]}
        assert kube.get_or_none(kube.resource("apiextensions.k8s.io/v1",
                                              "CustomResourceDefinition"),
                                None, "websites.quickstart.example.com") is not None
        assert kube.get_or_none(kube.resource("v1", "ConfigMap"), "orksync-system",
                                "orksync-inventory-orksync-system.quickstart") is None
    finally:
        kube.close()
