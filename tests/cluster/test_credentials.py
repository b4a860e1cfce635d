"""orksync.cluster.credentials without a cluster: what an exec plugin's ExecCredential may
say, how the plugin is run (its arguments, environment, KUBERNETES_EXEC_INFO, no
terminal), when it runs again, and its errors (naming the user and the command, never the
credential). A plugin whose token the control plane accepts:
tests/cluster/test_credentials_cluster.py."""

from __future__ import annotations

import json
import ssl
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from orksync.cluster import credentials
from orksync.cluster.credentials import (
    ExecCredentialError,
    ExecCredentials,
    ExecPlugin,
    parse_exec_credential,
)
from orksync.errors import ClusterError

V1 = "client.authentication.k8s.io/v1"
V1BETA1 = "client.authentication.k8s.io/v1beta1"
SECRET = "s3cr3t-t0ken-value"


def answer(status: Any, api_version: str = V1, kind: str = "ExecCredential") -> bytes:
    return json.dumps({"apiVersion": api_version, "kind": kind, "status": status}).encode()


def test_an_exec_credential_holds_a_token_or_a_client_certificate_and_may_expire() -> None:
    assert parse_exec_credential(answer({"token": "t"}), V1) == credentials.Issued(token="t")
    issued = parse_exec_credential(answer({
        "clientCertificateData": "CERT", "clientKeyData": "KEY",
        "expirationTimestamp": "2030-01-02T03:04:05Z"}, V1BETA1), V1BETA1)
    assert (issued.token, issued.certificate, issued.key) == (None, b"CERT", b"KEY")
    assert issued.expires == datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC).timestamp()
    assert "t0ken" not in repr(parse_exec_credential(answer({"token": SECRET}), V1))


@pytest.mark.parametrize(("output", "message"), [
    (b"token: " + SECRET.encode(), "its output is not JSON"),
    (b'["' + SECRET.encode() + b'"]', "its output is not a JSON object"),
    (answer({"token": SECRET}, kind="Other"), "not an ExecCredential (kind)"),
    (answer({"token": SECRET}, V1BETA1),
     f"it answered apiVersion '{V1BETA1}'; the kubeconfig asks for '{V1}'"),
    (answer(None), "its ExecCredential has no status"),
    (answer({}), "status holds neither a token nor a client certificate"),
    (answer({"token": 7}), "status.token is not a string"),
    (answer({"clientCertificateData": SECRET}),
     "status.clientKeyData is missing (a client certificate needs both"),
    (answer({"token": SECRET, "expirationTimestamp": "tomorrow"}),
     "status.expirationTimestamp is not an RFC 3339 time"),
    (answer({"token": SECRET, "expirationTimestamp": "2030-01-02T03:04:05"}),
     "status.expirationTimestamp has no time zone"),
])
def test_an_exec_credential_that_cannot_be_used_says_why_without_its_values(
        output: bytes, message: str) -> None:
    with pytest.raises(ExecCredentialError) as err:
        parse_exec_credential(output, V1)
    assert message in str(err.value)
    assert SECRET not in str(err.value)


PLUGIN = """
import json, os, sys
state = sys.argv[1]
with open(os.path.join(state, "runs"), "a") as runs:
    runs.write("x")
calls = len(open(os.path.join(state, "runs")).read())
with open(os.path.join(state, "seen.json"), "w") as seen:
    json.dump({"args": sys.argv[2:], "env": dict(os.environ),
               "stdin_is_tty": os.isatty(0), "stdin": sys.stdin.read()}, seen)
answers = json.load(open(os.path.join(state, "answers.json")))
plan = answers[min(calls, len(answers)) - 1]
sys.stderr.write(plan.get("stderr", ""))
print(json.dumps(plan.get("output")) if "output" in plan else plan.get("raw", ""))
sys.exit(plan.get("exit", 0))
"""


class Plugin:
    """A real exec plugin (a Python script) that answers from a list, one answer per run
    (the last one repeated), and records its runs and what it was given."""

    def __init__(self, tmp_path: Path) -> None:
        self.state = tmp_path / "plugin"
        self.state.mkdir(parents=True)
        self.script = self.state / "plugin.py"
        self.script.write_text(PLUGIN)

    def answers(self, *plans: dict[str, Any]) -> None:
        (self.state / "answers.json").write_text(json.dumps(list(plans)))

    @property
    def runs(self) -> int:
        path = self.state / "runs"
        return len(path.read_text()) if path.exists() else 0

    def seen(self) -> dict[str, Any]:
        return json.loads((self.state / "seen.json").read_text())

    def exec_section(self, *args: str, **more: Any) -> dict[str, Any]:
        return {"apiVersion": V1, "command": sys.executable,
                "args": [str(self.script), str(self.state), *args],
                "interactiveMode": "IfAvailable", **more}


def token(value: str, expires: str | None = None, api_version: str = V1) -> dict[str, Any]:
    status: dict[str, Any] = {"token": value}
    if expires:
        status["expirationTimestamp"] = expires
    return {"output": {"apiVersion": api_version, "kind": "ExecCredential", "status": status}}


def exec_credentials(plugin: Plugin, *, clock: Any = None, **section: Any) -> ExecCredentials:
    conf = ExecPlugin.from_kubeconfig(
        plugin.exec_section(**section), where="users[0].user.exec", user="dev",
        file=plugin.state / "kubeconfig",
        cluster={"server": "https://api.example:6443", "config": {"region": "x"}})
    return ExecCredentials(conf, lambda: ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), clock=clock)


def test_the_plugin_gets_its_args_env_and_exec_info_and_never_a_terminal(
        tmp_path: Path) -> None:
    plugin = Plugin(tmp_path)
    plugin.answers(token("t"))
    creds = exec_credentials(plugin, env=[{"name": "PLUGIN_OPTION", "value": "on"}],
                             provideClusterInfo=True)
    assert creds.authorization() == "Bearer t"
    seen = plugin.seen()
    assert seen["args"] == []
    assert seen["env"]["PLUGIN_OPTION"] == "on"
    assert seen["env"]["PATH"]  # the process environment, with the plugin's env on top
    assert json.loads(seen["env"]["KUBERNETES_EXEC_INFO"]) == {
        "apiVersion": V1, "kind": "ExecCredential",
        "spec": {"interactive": False, "cluster": {"server": "https://api.example:6443",
                                                   "config": {"region": "x"}}}}
    assert (seen["stdin_is_tty"], seen["stdin"]) == (False, "")


def test_a_credential_is_cached_until_shortly_before_it_expires(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path)
    plugin.answers(token("first", "2030-01-01T00:00:00Z"), token("second"))
    expiry = datetime(2030, 1, 1, tzinfo=UTC).timestamp()
    now = [expiry - 3600]
    creds = exec_credentials(plugin, clock=lambda: now[0])
    assert [creds.authorization() for _ in range(3)] == ["Bearer first"] * 3
    assert plugin.runs == 1
    now[0] = expiry - credentials.EXPIRY_MARGIN - 1
    assert creds.authorization() == "Bearer first"
    now[0] = expiry - credentials.EXPIRY_MARGIN
    assert creds.authorization() == "Bearer second"  # renewed before it expires
    now[0] = expiry + 10 ** 6
    assert creds.authorization() == "Bearer second"  # no expiry: kept
    assert plugin.runs == 2


def test_threads_that_need_the_credential_at_once_run_the_plugin_once(tmp_path: Path) -> None:
    plugin = Plugin(tmp_path)
    plugin.answers(token("shared"))
    creds = exec_credentials(plugin)
    start = threading.Barrier(8)
    got: list[str | None] = []

    def ask() -> None:
        start.wait()
        got.append(creds.authorization())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == ["Bearer shared"] * 8
    assert plugin.runs == 1


def test_a_refused_credential_is_renewed_once_however_many_requests_saw_it_refused(
        tmp_path: Path) -> None:
    plugin = Plugin(tmp_path)
    plugin.answers(token("old"), token("new"))
    creds = exec_credentials(plugin)
    assert creds.authorization() == "Bearer old"
    # three requests sent with the old credential get a 401 each
    assert all(creds.rejected("Bearer old", None) for _ in range(3))
    assert creds.authorization() == "Bearer new"
    assert creds.rejected("Bearer old", None)  # late: already renewed, send the new one
    assert creds.authorization() == "Bearer new"
    assert plugin.runs == 2


def test_a_failing_plugin_names_the_user_and_command_and_shows_its_stderr_bounded(
        tmp_path: Path) -> None:
    plugin = Plugin(tmp_path)
    plugin.answers({"exit": 3, "stderr": "login expired: run `cloud login`\n" + "x" * 5000,
                    "raw": SECRET})
    with pytest.raises(ClusterError) as err:
        exec_credentials(plugin).authorization()
    text = str(err.value)
    assert text.startswith(f"{plugin.state / 'kubeconfig'}: user 'dev': exec credential "
                           f"plugin '{sys.executable}' failed (exit status 3); it said: ...")
    assert "login expired" not in text  # the start of a long stderr is cut
    assert text.endswith("x" * credentials.STDERR_SHOWN)
    assert SECRET not in text  # what it printed on stdout is never shown

    plugin.answers({"raw": f'{{"status": {{"token": "{SECRET}"'})
    with pytest.raises(ClusterError) as err:
        exec_credentials(plugin).authorization()
    assert str(err.value).endswith(f"exec credential plugin '{sys.executable}': its output is "
                                   "not JSON")
    assert SECRET not in str(err.value)


def test_a_missing_plugin_shows_its_install_hint(tmp_path: Path) -> None:
    conf = ExecPlugin.from_kubeconfig(
        {"apiVersion": V1BETA1, "command": str(tmp_path / "no-such-plugin"),
         "installHint": "install it with `brew install no-such-plugin`"},
        where="users[0].user.exec", user="dev", file=tmp_path / "config", cluster={})
    with pytest.raises(ClusterError, match=r"user 'dev': exec credential plugin '.*"
                       r"no-such-plugin': command not found \(install it with"):
        ExecCredentials(conf, lambda: ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)).authorization()


def test_a_client_certificate_that_cannot_be_loaded_is_named_without_its_contents(
        tmp_path: Path) -> None:
    plugin = Plugin(tmp_path)
    plugin.answers({"output": {"apiVersion": V1, "kind": "ExecCredential", "status": {
        "clientCertificateData": SECRET, "clientKeyData": SECRET}}})
    with pytest.raises(ClusterError) as err:
        exec_credentials(plugin).tls()
    assert "its client certificate and key cannot be used" in str(err.value)
    assert SECRET not in str(err.value)
