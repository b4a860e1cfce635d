"""Credentials that a kubeconfig user obtains from a program rather than states: an `exec`
credential plugin (client.authentication.k8s.io ExecCredential, as client-go runs it) and an
`auth-provider` (`oidc`, `gcp`: its token produced by the `kubernetes` package's kubeconfig
loader). Either way the request itself goes through orksync's own transport: these only
produce the Authorization header and, for a plugin that answers with a client certificate,
the TLS context holding it.

What orksync.cluster.kube asks of any credentials (:class:`Authentication`): the current
Authorization header and, when the credentials carry a client certificate, the TLS context
holding it (one pair, `current`), and, after a 401 answer, whether fresh credentials are
worth one more attempt (`rejected`).

An exec plugin runs as client-go runs it: the command (a relative name with a `/` is
resolved against the kubeconfig's directory) with its `args`, the process environment plus
its `env`, `KUBERNETES_EXEC_INFO` describing the request (never interactive: orksync runs
unattended, so standard input is /dev/null and a plugin whose `interactiveMode` is `Always`
is refused), and `spec.cluster` when `provideClusterInfo` is set. Its answer is cached per
process and thread-safe: it is used until shortly before its `expirationTimestamp`, or until
the API server answers 401 to it (then the plugin runs again, once per rejected credential,
however many threads saw the 401).

No token, key or certificate ever reaches an error message or a log line; a failing
plugin's error names the kubeconfig user and the command, and shows the end of what the
plugin wrote to standard error (bounded: `STDERR_SHOWN` characters).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import ssl
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from orksync.errors import ClusterError

__all__ = [
    "API_VERSIONS",
    "AuthProviderCredentials",
    "Authentication",
    "ExecCredentials",
    "ExecPlugin",
    "Issued",
    "load_cert_chain_data",
    "parse_exec_credential",
]

log = logging.getLogger(__name__)

API_VERSIONS = ("client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1")
# A credential is renewed this many seconds before its expirationTimestamp, so that a request
# sent just before the expiry does not reach the server after it.
EXPIRY_MARGIN = 10.0
# Seconds a plugin may run: a cloud CLI fetching a token over the network takes seconds; one
# that hangs must not hold every request (and the agent's lease) forever.
PLUGIN_TIMEOUT = 120.0
STDERR_SHOWN = 1000  # characters of a failing plugin's standard error shown in its error
WALL_CLOCK: Callable[[], float] = time.time  # what expirationTimestamp is compared with


class Authentication(Protocol):
    """What a request needs of credentials. Thread-safe."""

    def authorization(self) -> str | None:
        """The value of the Authorization header (None: send none)."""

    def current(self) -> tuple[str | None, ssl.SSLContext | None]:
        """The Authorization header and the TLS context with the credentials' client
        certificate (None: the connection's own), taken together: never the header of one
        credential with the certificate of another."""

    def rejected(self, authorization: str | None, tls: ssl.SSLContext | None) -> bool:
        """The API server answered 401 to a request sent with these: forget them; True
        when another attempt would send different credentials."""


# --- client certificates given as data ----------------------------------------------------------


def load_cert_chain_data(tls: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """Load a client certificate and key given as PEM bytes into `tls`. ssl loads them
    only from files: they are written to a private directory (0700, files 0600) and
    removed as soon as they are loaded. Raises ssl.SSLError or OSError."""
    private = Path(tempfile.mkdtemp(prefix="orksync-credentials-"))
    try:
        tls.load_cert_chain(str(_private_file(private / "client.crt", cert)),
                            str(_private_file(private / "client.key", key)))
    finally:
        shutil.rmtree(private, ignore_errors=True)


def _private_file(path: Path, data: bytes) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    return path


# --- ExecCredential -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Issued:
    """What a plugin answered: a token, or a client certificate and key (PEM), or both;
    `expires` in seconds since the epoch (None: until the server refuses it)."""

    token: str | None = None
    certificate: bytes | None = None
    key: bytes | None = None
    expires: float | None = None

    def __repr__(self) -> str:  # never the token or the key
        return f"Issued(token={'***' if self.token else None}, " \
               f"certificate={self.certificate is not None}, expires={self.expires})"


class ExecCredentialError(ValueError):
    """A plugin's answer that is not a usable ExecCredential (the message quotes no
    value of it)."""


def parse_exec_credential(output: bytes, api_version: str) -> Issued:
    """The credential in a plugin's standard output: an ExecCredential of `api_version`
    whose `status` holds a `token` or `clientCertificateData` and `clientKeyData` (PEM),
    and may hold an `expirationTimestamp` (RFC 3339). Raises ExecCredentialError."""
    try:
        doc = json.loads(output)
    except (ValueError, UnicodeDecodeError):
        raise ExecCredentialError("its output is not JSON") from None
    if not isinstance(doc, Mapping):
        raise ExecCredentialError("its output is not a JSON object")
    if doc.get("kind") != "ExecCredential":
        raise ExecCredentialError("its output is not an ExecCredential (kind)")
    if doc.get("apiVersion") != api_version:
        shown = doc.get("apiVersion") if isinstance(doc.get("apiVersion"), str) else "none"
        raise ExecCredentialError(f"it answered apiVersion {shown!r}; the kubeconfig asks for "
                                  f"{api_version!r}")
    status = doc.get("status")
    if not isinstance(status, Mapping):
        raise ExecCredentialError("its ExecCredential has no status")
    token = _text(status, "token")
    cert, key = _text(status, "clientCertificateData"), _text(status, "clientKeyData")
    if bool(cert) != bool(key):
        missing = "clientKeyData" if cert else "clientCertificateData"
        raise ExecCredentialError(f"status.{missing} is missing (a client certificate needs "
                                  "both the certificate and its key)")
    if not token and not cert:
        raise ExecCredentialError("status holds neither a token nor a client certificate")
    expires = None
    stamp = status.get("expirationTimestamp")
    if stamp is not None:
        if not isinstance(stamp, str):
            raise ExecCredentialError("status.expirationTimestamp is not a string")
        try:
            when = datetime.fromisoformat(stamp)
        except ValueError:
            raise ExecCredentialError("status.expirationTimestamp is not an RFC 3339 time "
                                      "(like 2026-01-02T15:04:05Z)") from None
        if when.tzinfo is None:
            raise ExecCredentialError("status.expirationTimestamp has no time zone")
        expires = when.timestamp()
    return Issued(token=token or None, certificate=cert.encode() if cert else None,
                  key=key.encode() if key else None, expires=expires)


def _text(status: Mapping[str, Any], key: str) -> str:
    value = status.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ExecCredentialError(f"status.{key} is not a string")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecPlugin:
    """A kubeconfig user's `exec` section, checked; `user` names the kubeconfig user and
    `file` the kubeconfig, for messages; `cluster` is `spec.cluster` of
    KUBERNETES_EXEC_INFO when the plugin asks for it (provideClusterInfo)."""

    user: str
    file: str
    command: str
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    api_version: str = API_VERSIONS[0]
    install_hint: str = ""
    cluster: Mapping[str, Any] | None = None

    @classmethod
    def from_kubeconfig(cls, body: Any, *, where: str, user: str, file: Path,
                        cluster: Mapping[str, Any]) -> ExecPlugin:
        """The plugin of a user's `exec` map (`where` names it: `users[0].user.exec`;
        relative command paths resolve against the kubeconfig's directory). Raises
        ClusterError naming the file and field."""
        def bad(field: str, problem: str) -> ClusterError:
            return ClusterError(f"{where}.{field}: {problem}" if field else
                                f"{where}: {problem}", subject=str(file))

        if not isinstance(body, Mapping):
            raise bad("", "not a map")
        api_version = body.get("apiVersion")
        if api_version not in API_VERSIONS:
            raise bad("apiVersion", f"must be one of {', '.join(API_VERSIONS)}")
        command = body.get("command")
        if not isinstance(command, str) or not command:
            raise bad("command", "missing")
        if os.sep in command and not os.path.isabs(command):
            command = str(file.parent / command)  # as client-go resolves it
        args = body.get("args") or []
        if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
            raise bad("args", "not a list of strings")
        env: list[tuple[str, str]] = []
        for i, item in enumerate(body.get("env") or []):
            if not isinstance(item, Mapping) or not isinstance(item.get("name"), str) or \
                    not isinstance(item.get("value", ""), str):
                raise bad(f"env[{i}]", "not a map of a `name` and a `value` string")
            env.append((item["name"], item.get("value") or ""))
        mode = body.get("interactiveMode")
        if mode is None and api_version == API_VERSIONS[0]:
            raise bad("interactiveMode", f"missing (required by {api_version}: Never, "
                                         "IfAvailable or Always)")
        if mode not in (None, "Never", "IfAvailable", "Always"):
            raise bad("interactiveMode", "must be Never, IfAvailable or Always")
        if mode == "Always":
            raise bad("interactiveMode", "Always: the plugin needs a terminal, and orksync "
                                         "never prompts (use a plugin that runs unattended)")
        provide = body.get("provideClusterInfo", False)
        if not isinstance(provide, bool):
            raise bad("provideClusterInfo", "not true or false")
        hint = body.get("installHint") or ""
        return cls(user=user, file=str(file), command=command, args=tuple(args), env=tuple(env),
                   api_version=str(api_version), install_hint=str(hint),
                   cluster=cluster if provide else None)

    def exec_info(self) -> str:
        """KUBERNETES_EXEC_INFO: the ExecCredential the plugin is asked to complete."""
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster is not None:
            spec["cluster"] = dict(self.cluster)
        return json.dumps({"apiVersion": self.api_version, "kind": "ExecCredential",
                           "spec": spec})

    def run(self) -> Issued:
        """Run the plugin once; its credential. Raises ClusterError (naming the user and
        the command, never the credential)."""
        import subprocess  # here: a kubeconfig without a plugin never pays for its import

        shown = f"user {self.user!r}: exec credential plugin {self.command!r}"
        env = {**os.environ, **dict(self.env), "KUBERNETES_EXEC_INFO": self.exec_info()}
        try:
            done = subprocess.run([self.command, *self.args], env=env, stdin=subprocess.DEVNULL,
                                  capture_output=True, timeout=PLUGIN_TIMEOUT, check=False)
        except FileNotFoundError:
            hint = f" ({self.install_hint.strip()})" if self.install_hint.strip() else ""
            raise ClusterError(f"{shown}: command not found{hint}",
                               subject=self.file) from None
        except subprocess.TimeoutExpired:
            raise ClusterError(f"{shown}: no answer within "
                               f"{PLUGIN_TIMEOUT:.0f}s", subject=self.file) from None
        except OSError as err:
            raise ClusterError(f"{shown}: cannot run it: "
                               f"{err.strerror or type(err).__name__}",
                               subject=self.file) from None
        if done.returncode != 0:
            raise ClusterError(f"{shown} failed (exit status "
                               f"{done.returncode}){_stderr(done.stderr)}", subject=self.file)
        try:
            return parse_exec_credential(done.stdout, self.api_version)
        except ExecCredentialError as err:
            raise ClusterError(f"{shown}: {err}", subject=self.file) \
                from None


def _stderr(data: bytes) -> str:
    """The end of a plugin's standard error, bounded, for its error message."""
    text = data.decode("utf-8", "replace").strip()
    if not text:
        return ""
    if len(text) > STDERR_SHOWN:
        text = "..." + text[-STDERR_SHOWN:]
    return f"; it said: {text}"


class ExecCredentials:
    """The credential of an exec plugin, run when first needed, again shortly before the
    credential expires, and again after the server refused it. `make_tls` builds a new
    TLS context for the cluster, as the connection's own `tls`: the plugin's client
    certificate, when it answers with one, is loaded into a new one (replacing the
    kubeconfig's, as in client-go); while it answers without, `tls` is used. Thread-safe:
    one thread runs the plugin, the others wait for its answer."""

    def __init__(self, plugin: ExecPlugin, make_tls: Callable[[], ssl.SSLContext], *,
                 tls: ssl.SSLContext | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self.plugin = plugin
        self._make_tls = make_tls
        self._base_tls = tls
        self._clock = clock
        self._lock = threading.Lock()
        self._issued: Issued | None = None
        # the Authorization header and TLS context of `_issued`, replaced as one
        self._pair: tuple[str | None, ssl.SSLContext | None] = (None, tls)
        self.runs = 0  # times the plugin ran

    def authorization(self) -> str | None:
        return self.current()[0]

    def tls(self) -> ssl.SSLContext | None:
        return self.current()[1]

    def rejected(self, authorization: str | None, tls: ssl.SSLContext | None) -> bool:
        with self._lock:
            if self._issued is not None and (authorization, tls) == self._pair:
                log.info("user %r: the API server refused the exec plugin's credential; "
                         "running the plugin again", self.plugin.user)
                self._issued = None  # the next request runs the plugin
            return True  # either way the next attempt sends a credential not yet refused

    def current(self) -> tuple[str | None, ssl.SSLContext | None]:
        issued, pair = self._issued, self._pair
        if issued is None or self._expiring(issued):
            with self._lock:
                if self._issued is None or self._expiring(self._issued):
                    self._renew()
                pair = self._pair
        return pair

    def _expiring(self, issued: Issued) -> bool:
        if issued.expires is None:
            return False
        now = (self._clock or WALL_CLOCK)()
        return now >= issued.expires - EXPIRY_MARGIN

    def _renew(self) -> None:
        """Run the plugin (the lock held) and keep its answer."""
        self.runs += 1
        issued = self.plugin.run()
        tls = self._base_tls
        if issued.certificate is not None and issued.key is not None:
            tls = self._make_tls()
            try:
                load_cert_chain_data(tls, issued.certificate, issued.key)
            except (ssl.SSLError, OSError) as err:
                reason = getattr(err, "reason", None) or getattr(err, "strerror", None) or \
                    type(err).__name__
                raise ClusterError(f"user {self.plugin.user!r}: exec credential plugin "
                                   f"{self.plugin.command!r}: its "
                                   f"client certificate and key cannot be used: {reason}",
                                   subject=self.plugin.file) from None
        self._pair = (f"Bearer {issued.token}" if issued.token else None, tls)
        self._issued = issued


# --- auth-provider ------------------------------------------------------------------------------

AUTH_PROVIDERS = ("oidc", "gcp")  # the ones the installed `kubernetes` package implements
_PROVIDER_NEEDS = {
    "oidc": "config.id-token, a JWT; once it has expired, config.refresh-token, client-id, "
            "client-secret and idp-issuer-url to refresh it",
    "gcp": "config.access-token with its expiry, or config.cmd-path, or the google-auth "
           "package with application default credentials"}


class AuthProviderCredentials:
    """The token of a user's `auth-provider`, produced by the `kubernetes` package's
    kubeconfig loader (`oidc`: the id-token, refreshed with the refresh-token once it has
    expired; `gcp`: a Google access token, refreshed as it expires). The refreshed tokens
    are not written back to the kubeconfig. The loader sees only the `auth-provider` map
    (`body`) and the `server`: no key of the kubeconfig reaches the files it writes. `file`
    is the kubeconfig it came from (relative paths are relative to its directory)."""

    def __init__(self, body: Mapping[str, Any], *, server: str, user: str, file: Path,
                 provider: str) -> None:
        self._document = {
            "current-context": "c",
            "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
            "clusters": [{"name": "c", "cluster": {"server": server}}],
            "users": [{"name": "u", "user": {"auth-provider": body}}]}
        self._file = file
        self._what = f"user {user!r}: auth-provider {provider!r}"
        self._needs = _PROVIDER_NEEDS[provider]
        self._lock = threading.Lock()
        self._configuration: Any = None
        self._load()

    def _load(self) -> None:
        """A fresh loader and its client configuration (the lock held, or in __init__)."""
        from kubernetes import client as k8s_client
        from kubernetes.config import kube_config

        configuration = k8s_client.Configuration()
        try:
            loader = kube_config.KubeConfigLoader(
                config_dict=json.loads(json.dumps(self._document)),  # the loader writes to it
                config_base_path=str(self._file.parent), config_persister=None)
            loader.load_and_set(configuration)
        except Exception as err:  # the loader and the libraries it calls raise anything
            # the type only: a message of an OAuth or Google library may quote a token
            raise ClusterError(f"{self._what}: the kubernetes package could not "
                               f"produce a token ({type(err).__name__}; it needs "
                               f"{self._needs})", subject=str(self._file)) from None
        if not configuration.api_key.get("BearerToken"):
            raise ClusterError(f"{self._what}: the kubernetes package produced "
                               f"no token (it needs {self._needs})", subject=str(self._file))
        self._configuration = configuration

    def authorization(self) -> str | None:
        with self._lock:  # the loader's refresh hook is not thread-safe
            try:
                value = self._configuration.get_api_key_with_prefix("BearerToken")
            except Exception as err:
                raise ClusterError(f"{self._what}: refreshing the token failed "
                                   f"({type(err).__name__})", subject=str(self._file)) \
                    from None
        return str(value) if value else None

    def current(self) -> tuple[str | None, ssl.SSLContext | None]:
        return self.authorization(), None

    def rejected(self, authorization: str | None, tls: ssl.SSLContext | None) -> bool:
        """Load again: the loader refreshes an expired oidc id-token only when it loads."""
        with self._lock:
            current = self._configuration.api_key.get("BearerToken")
            if current != authorization:
                return True
            self._load()
            return bool(self._configuration.api_key.get("BearerToken") != authorization)


def check_auth_provider(body: Any, *, where: str, file: Path) -> str:
    """The provider name of a user's `auth-provider` map, if the `kubernetes` package can
    produce its token. Raises ClusterError naming the field otherwise."""
    if not isinstance(body, Mapping):
        raise ClusterError(f"{where}: not a map", subject=str(file))
    name = body.get("name")
    if name == "azure":
        raise ClusterError(f"{where}.name: the azure auth-provider is not supported (kubectl "
                           "dropped it too): use the kubelogin exec plugin "
                           "(`kubelogin convert-kubeconfig`)", subject=str(file))
    if name not in AUTH_PROVIDERS:
        raise ClusterError(f"{where}.name: {name!r} is not an auth-provider orksync supports "
                           f"({', '.join(AUTH_PROVIDERS)}); use an exec plugin",
                           subject=str(file))
    return str(name)
