"""Where the API server is and how to authenticate to it, read from a kubeconfig (or a
pod's service account) without the `kubernetes` package, whose import costs every process
that reads one (docs/ab.md, "The kubeconfig reader").

kubectl's (client-go's) rules: the file list and its merge, the context, the cluster's and
the user's fields, relative paths, warnings for ignored fields and errors naming the file
and the field (docs/operations.md, "Cluster access"). No key, token or
password ever reaches an error message or a log line.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import logging
import os
import re
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import quote

from orksync.cluster import proxy as proxies
from orksync.cluster.credentials import (
    Authentication,
    AuthProviderCredentials,
    ExecCredentials,
    ExecPlugin,
    check_auth_provider,
    load_cert_chain_data,
)
from orksync.errors import ClusterError

__all__ = ["Connection", "Credentials", "in_cluster", "load_kubeconfig"]

log = logging.getLogger(__name__)

DEFAULT_KUBECONFIG = "~/.kube/config"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REFRESH = 60.0  # seconds a token read from a file is used before reading it again
CLOCK: Callable[[], float] = time.monotonic  # what that age is measured with (tests set it)

_CLUSTER_FIELDS = frozenset({"server", "certificate-authority", "certificate-authority-data",
                             "insecure-skip-tls-verify", "tls-server-name", "proxy-url",
                             # no effect on how orksync connects:
                             "extensions", "disable-compression"})
_USER_FIELDS = frozenset({"client-certificate", "client-certificate-data", "client-key",
                          "client-key-data", "token", "tokenFile", "username", "password",
                          "exec", "auth-provider", "as", "as-uid", "as-groups",
                          "as-user-extra", "extensions"})
_SECTIONS = (("clusters", "cluster"), ("users", "user"), ("contexts", "context"))


class Credentials:
    """The Authorization header of a connection: fixed (a token, basic authentication),
    or a token read from a file and read again once it is `refresh` seconds old, so that
    a rotated service-account token is picked up. Thread-safe. (An Authentication: no
    client certificate of its own; a 401 is final, as in client-go.)"""

    def __init__(self, *, token: str | None = None, token_file: Path | None = None,
                 basic: str | None = None, refresh: float | None = None,
                 clock: Callable[[], float] | None = None) -> None:
        self._header = f"Bearer {token}" if token else None
        if basic is not None:
            self._header = "Basic " + base64.b64encode(basic.encode()).decode()
        self._file = token_file
        self._refresh = TOKEN_REFRESH if refresh is None else refresh
        self._clock = CLOCK if clock is None else clock
        self._read_at = -float("inf")
        self._lock = threading.Lock()
        if token_file is not None:
            self._reread(first=True)

    def authorization(self) -> str | None:
        """The value of the Authorization header (None: send none)."""
        if self._file is not None and self._clock() - self._read_at >= self._refresh:
            with self._lock:
                if self._clock() - self._read_at >= self._refresh:
                    self._reread(first=False)
        return self._header

    def current(self) -> tuple[str | None, ssl.SSLContext | None]:
        return self.authorization(), None

    def rejected(self, authorization: str | None, tls: ssl.SSLContext | None) -> bool:
        return False

    def _reread(self, *, first: bool) -> None:
        assert self._file is not None
        try:
            token = self._file.read_text(encoding="utf-8").strip()
            if not token:
                raise ValueError("empty")
        except (OSError, ValueError) as err:
            # never str(err) of a decoding error: it quotes a byte of the file
            reason = err.strerror if isinstance(err, OSError) else "empty or not UTF-8"
            if first and self._header is None:
                raise ClusterError(f"cannot read the token: {reason}",
                                   subject=str(self._file)) from err
            # client-go keeps the token it has; the file may be mid-rotation
            log.warning("%s: cannot read the token (%s); using the one read before "
                        "or given as `token`", self._file, reason)
        else:
            self._header = f"Bearer {token}"
        self._read_at = self._clock()


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """Everything orksync.cluster.kube needs to reach one API server."""

    server: str  # scheme://host[:port][/prefix], no trailing slash
    tls: ssl.SSLContext
    verify: bool = True
    tls_server_name: str | None = None
    credentials: Authentication = field(default_factory=Credentials)
    proxy: proxies.Proxy | None = None
    # sent with every request: the user's impersonation (`as`, ...)
    headers: tuple[tuple[str, str], ...] = ()
    # for error messages: where the CA came from ("certificate-authority-data of cluster
    # 'x' in /path/kubeconfig"); never the certificate itself
    ca_origin: str = "the system's trusted CAs"
    # for error messages: where the server came from ("kubeconfig context 'x' in /path")
    origin: str = ""


# --- kubeconfig ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Entry:
    """A named cluster, user or context and the file that defined it."""

    name: str
    body: Mapping[str, Any]
    file: Path
    where: str  # `clusters[2].cluster`, for messages

    def describe(self, kind: str) -> str:
        return f"{kind} {self.name!r} ({self.where})"


def load_kubeconfig(path: str | Path | None = None, context: str | None = None, *,
                    environ: Mapping[str, str] | None = None) -> Connection:
    """The connection of a kubeconfig's context. Raises ClusterError for a kubeconfig that
    cannot be used (naming the file and field)."""
    env = os.environ if environ is None else environ
    files = _files(path, env)
    entries: dict[str, dict[str, _Entry]] = {section: {} for section, _ in _SECTIONS}
    current, current_file = "", None
    for file in files:
        doc = _read(file)
        if doc is None:
            continue
        for section, key in _SECTIONS:
            for entry in _named(doc, section, key, file):
                entries[section].setdefault(entry.name, entry)
        here = doc.get("current-context")
        if here and not current:
            if not isinstance(here, str):
                raise ClusterError("current-context: not a string", subject=str(file))
            current, current_file = here, file
    shown = ", ".join(map(str, files)) or "KUBECONFIG"
    name = context or current
    if not name:
        raise ClusterError("no current-context is set and no --context was given",
                           subject=shown)
    ctx = entries["contexts"].get(name)
    if ctx is None:
        origin = "--context" if context else f"current-context of {current_file}"
        raise ClusterError(f"context {name!r} ({origin}) is not defined", subject=shown)
    cluster_name = _string(ctx, "cluster")
    if not cluster_name:
        raise ClusterError(f"{ctx.where}.cluster: missing", subject=str(ctx.file))
    cluster = entries["clusters"].get(cluster_name)
    if cluster is None:
        raise ClusterError(f"{ctx.where}.cluster: cluster {cluster_name!r} is not defined "
                           f"in {shown}", subject=str(ctx.file))
    user_name = _string(ctx, "user")
    user = entries["users"].get(user_name) if user_name else None
    if user_name and user is None:
        raise ClusterError(f"{ctx.where}.user: user {user_name!r} is not defined in {shown}",
                           subject=str(ctx.file))
    _warn_unknown(cluster, _CLUSTER_FIELDS, "cluster")
    if user is not None:
        _warn_unknown(user, _USER_FIELDS, "user")
    return replace(_connection(cluster, user, env),
                   origin=f"kubeconfig context {name!r} in {ctx.file}")


def _proxy(server: str, env: Mapping[str, str], cluster: _Entry | None) -> proxies.Proxy | None:
    """The cluster's `proxy-url`, else the proxy the environment names for `server`."""
    url = _string(cluster, "proxy-url") if cluster is not None else ""
    if url:
        try:
            return proxies.parse_proxy_url(url)
        except proxies.ProxyError as err:  # the value is not shown: it may hold a password
            assert cluster is not None
            raise ClusterError(f"{cluster.where}.proxy-url: {err}",
                               subject=str(cluster.file)) from None
    try:
        found = proxies.from_environment(server, env)
    except proxies.ProxyError as err:
        raise ClusterError(f"the proxy environment: {err}") from None
    if found is None:
        return None
    log.debug("connecting to %s through the proxy %s (%s)", server, found[1].shown, found[0])
    return found[1]


def _files(path: str | Path | None, env: Mapping[str, str]) -> list[Path]:
    if path:
        explicit = Path(path).expanduser()
        if not explicit.is_file():
            raise ClusterError("the kubeconfig file does not exist", subject=str(explicit))
        return [explicit]
    listed = env.get("KUBECONFIG")
    if listed:
        found = [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
        found = [p for p in found if p.is_file()]
        if not found:
            raise ClusterError("none of the files in KUBECONFIG exists",
                               subject=f"KUBECONFIG={listed}")
        return found
    default = Path(DEFAULT_KUBECONFIG).expanduser()
    if not default.is_file():
        raise ClusterError("no kubeconfig: KUBECONFIG is not set and the default file does "
                           "not exist (and not running in a cluster)", subject=str(default))
    return [default]


def _read(file: Path) -> Mapping[str, Any] | None:
    """The document of one kubeconfig file; None for an empty file (kubectl skips it)."""
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        reason = err.strerror if isinstance(err, OSError) else "not UTF-8 text"
        raise ClusterError(f"cannot read the kubeconfig: {reason}", subject=str(file)) from err
    if not text.strip():
        return None
    doc = _parse(text, file)
    if doc is None:
        return None
    if not isinstance(doc, Mapping):
        raise ClusterError("not a kubeconfig: the document is not a map", subject=str(file))
    return doc


def _parse(text: str, file: Path) -> Any:
    """JSON when the file is JSON (what orksync's tools write: no YAML import at all),
    else PyYAML's safe loader: the reader the `kubernetes` client uses for kubeconfigs,
    so a value means what it meant before (YAML 1.1: `insecure-skip-tls-verify: yes` is
    true, as for kubectl). It imports in a fraction of ruamel.yaml's time."""
    if text.lstrip().startswith("{"):
        with contextlib.suppress(ValueError):
            return json.loads(text)
    import yaml

    try:
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        line = f" (line {mark.line + 1})" if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise ClusterError(f"invalid YAML{line}: {problem}", subject=str(file)) from err


def _named(doc: Mapping[str, Any], section: str, key: str, file: Path) -> list[_Entry]:
    items = doc.get(section)
    if items is None:
        return []
    if not isinstance(items, list):
        raise ClusterError(f"{section}: not a list", subject=str(file))
    found: list[_Entry] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f"{section}[{i}]"
        if not isinstance(item, Mapping):
            raise ClusterError(f"{where}: not a map", subject=str(file))
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise ClusterError(f"{where}.name: missing", subject=str(file))
        body = item.get(key)
        if body is None:
            body = {}
        if not isinstance(body, Mapping):
            raise ClusterError(f"{where}.{key}: not a map", subject=str(file))
        if name in seen:
            raise ClusterError(f"{where}.name: {name!r} is defined twice in {section}",
                               subject=str(file))
        seen.add(name)
        found.append(_Entry(name=name, body=body, file=file, where=f"{where}.{key}"))
    return found


def _warn_unknown(entry: _Entry, known: frozenset[str], kind: str) -> None:
    """kubectl ignores a field it does not know; so does orksync, saying so."""
    unknown = sorted(k for k, v in entry.body.items() if k not in known and v not in
                     (None, "", [], {}, False))
    if unknown:
        log.warning("%s: %s sets %s, which orksync does not know; ignored", entry.file,
                    entry.describe(kind), ", ".join(unknown))


def _string(entry: _Entry, key: str) -> str:
    value = entry.body.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ClusterError(f"{entry.where}.{key}: not a string", subject=str(entry.file))
    return value


def _flag(entry: _Entry, key: str) -> bool:
    value = entry.body.get(key, False)
    if not isinstance(value, bool):
        raise ClusterError(f"{entry.where}.{key}: not true or false",
                           subject=str(entry.file))
    return value


def _path(entry: _Entry, key: str) -> Path | None:
    """A file named by `key`, relative names resolved against the kubeconfig's directory;
    it must exist."""
    name = _string(entry, key)
    if not name:
        return None
    path = Path(name)
    if not path.is_absolute():
        path = entry.file.parent / path
    if not path.is_file():
        raise ClusterError(f"{entry.where}.{key}: file {path} does not exist",
                           subject=str(entry.file))
    return path


def _data(entry: _Entry, key: str) -> bytes | None:
    """A base64 `-data` field, decoded (the value is never shown)."""
    text = _string(entry, key)
    if not text:
        return None
    try:
        return base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as err:
        raise ClusterError(f"{entry.where}.{key}: not valid base64",
                           subject=str(entry.file)) from err


def _connection(cluster: _Entry, user: _Entry | None, env: Mapping[str, str]) -> Connection:
    server = _string(cluster, "server").rstrip("/")
    if not server:
        raise ClusterError(f"{cluster.where}.server: missing", subject=str(cluster.file))
    if not server.startswith(("https://", "http://")):
        # the value is not shown: a URL may carry a password
        raise ClusterError(f"{cluster.where}.server: not an https:// or http:// URL",
                           subject=str(cluster.file))
    verify = not _flag(cluster, "insecure-skip-tls-verify")
    ca_data = _data(cluster, "certificate-authority-data")
    ca_file = None if ca_data else _path(cluster, "certificate-authority")
    ca_field = "certificate-authority-data" if ca_data else \
        "certificate-authority" if ca_file else ""
    ca_origin = f"{ca_field} of cluster {cluster.name!r} in {cluster.file}" if ca_field \
        else "the system's trusted CAs"

    def make_tls() -> ssl.SSLContext:
        tls = _tls_context(verify=verify, ca_file=ca_file, ca_data=ca_data,
                           problem=lambda reason: ClusterError(
                               f"{cluster.where}.{ca_field}: not a usable CA certificate: "
                               f"{reason}", subject=str(cluster.file)))
        if user is not None:
            _load_client_certificate(tls, user)
        return tls

    tls = make_tls()
    credentials: Authentication = Credentials()
    headers: tuple[tuple[str, str], ...] = ()
    if user is not None:
        credentials = _credentials(user, cluster, server, ca_data or ca_file, make_tls, tls)
        headers = _impersonation(user)
    return Connection(server=server, tls=tls, verify=verify,
                      tls_server_name=_string(cluster, "tls-server-name") or None,
                      credentials=credentials, ca_origin=ca_origin,
                      proxy=_proxy(server, env, cluster), headers=headers)


def _tls_context(*, verify: bool, ca_file: Path | None, ca_data: bytes | None,
                 problem: Callable[[str], ClusterError]) -> ssl.SSLContext:
    """One TLS context for every connection of the pool: TLS 1.2 or later, no TLS
    compression or session tickets, HTTP/1.1 offered by ALPN, and unless
    `insecure-skip-tls-verify`, the server's certificate verified and its host name
    checked against the certificate's subject alternative names only."""
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    tls.minimum_version = ssl.TLSVersion.TLSv1_2
    tls.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_TICKET
    tls.hostname_checks_common_name = False
    tls.set_alpn_protocols(["http/1.1"])
    if not verify:
        tls.check_hostname = False
        tls.verify_mode = ssl.CERT_NONE
    try:
        if ca_data is not None:
            tls.load_verify_locations(cadata=ca_data.decode("ascii", "replace"))
        elif ca_file is not None:
            tls.load_verify_locations(cafile=str(ca_file))
        else:
            tls.load_default_certs()
    except (ssl.SSLError, OSError, ValueError) as err:
        raise problem(_ssl_reason(err)) from err
    return tls


def _load_client_certificate(tls: ssl.SSLContext, user: _Entry) -> None:
    """The user's client certificate and key into `tls`. ssl loads them only from files:
    `-data` values go through a private directory (load_cert_chain_data)."""
    cert_data = _data(user, "client-certificate-data")
    key_data = _data(user, "client-key-data")
    cert_file = None if cert_data else _path(user, "client-certificate")
    key_file = None if key_data else _path(user, "client-key")
    has_cert, has_key = bool(cert_data or cert_file), bool(key_data or key_file)
    if not has_cert and not has_key:
        return
    if has_cert != has_key:
        missing = "client-key" if has_cert else "client-certificate"
        raise ClusterError(f"{user.where}.{missing}: missing (a client certificate needs "
                           "both the certificate and its key)", subject=str(user.file))
    try:
        if cert_file is not None and key_file is not None:
            tls.load_cert_chain(str(cert_file), str(key_file))
        else:  # ssl loads only files: one of them is data
            cert = cert_data if cert_file is None else cert_file.read_bytes()
            key = key_data if key_file is None else key_file.read_bytes()
            assert cert is not None and key is not None
            load_cert_chain_data(tls, cert, key)
    except (ssl.SSLError, OSError) as err:
        raise ClusterError(f"{user.where}: cannot use the client certificate and key: "
                           f"{_ssl_reason(err)}", subject=str(user.file)) from err


def _ssl_reason(err: BaseException) -> str:
    """What went wrong, without file contents (ssl's and the OS's messages carry none),
    and without ssl's source location."""
    if isinstance(err, ssl.SSLError):
        text = err.reason or (err.strerror if isinstance(err.strerror, str) else "") or ""
        return re.sub(r" \(_ssl\.c:\d+\)$", "", text) or type(err).__name__
    if isinstance(err, OSError):
        return err.strerror or type(err).__name__
    return type(err).__name__


def _credentials(user: _Entry, cluster: _Entry, server: str, ca: bytes | Path | None,
                 make_tls: Callable[[], ssl.SSLContext], tls: ssl.SSLContext
                 ) -> Authentication:
    token_file = _path(user, "tokenFile")
    token = _string(user, "token") or None
    plugin, provider = user.body.get("exec"), user.body.get("auth-provider")
    if plugin is not None or provider is not None:
        static = [k for k in ("token", "tokenFile", "username") if user.body.get(k)]
        if plugin is not None and provider is not None:
            static.insert(0, "auth-provider")
        if static:
            chosen = "exec" if plugin is not None else "auth-provider"
            raise ClusterError(f"{user.where}: sets both {chosen} and {static[0]}: choose "
                               "one way to authenticate", subject=str(user.file))
    if plugin is not None:
        return ExecCredentials(ExecPlugin.from_kubeconfig(
            plugin, where=f"{user.where}.exec", user=user.name, file=user.file,
            cluster=_cluster_info(cluster, server, ca)), make_tls, tls=tls)
    if provider is not None:
        name = check_auth_provider(provider, where=f"{user.where}.auth-provider",
                                   file=user.file)
        return AuthProviderCredentials(provider, server=server, user=user.name,
                                       file=user.file, provider=name)
    if token_file is not None or token:
        return Credentials(token=token, token_file=token_file)
    username = _string(user, "username")
    if username:
        return Credentials(basic=f"{username}:{_string(user, 'password')}")
    return Credentials()


def _cluster_info(cluster: _Entry, server: str, ca: bytes | Path | None) -> dict[str, Any]:
    """`spec.cluster` of an exec plugin's KUBERNETES_EXEC_INFO, as client-go fills it."""
    info: dict[str, Any] = {"server": server}
    for key, name in (("tls-server-name", "tls-server-name"), ("proxy-url", "proxy-url")):
        if cluster.body.get(key):
            info[name] = cluster.body[key]
    if cluster.body.get("insecure-skip-tls-verify"):
        info["insecure-skip-tls-verify"] = True
    if isinstance(ca, Path):
        ca = ca.read_bytes()  # checked readable by the TLS context already
    if ca:
        info["certificate-authority-data"] = base64.b64encode(ca).decode()
    extensions = cluster.body.get("extensions")
    for item in extensions if isinstance(extensions, list) else []:
        if isinstance(item, Mapping) and item.get("name") == "client.authentication.k8s.io/exec":
            info["config"] = item.get("extension")
    return info


def _impersonation(user: _Entry) -> tuple[tuple[str, str], ...]:
    """The Impersonate-* headers of a user's `as`, `as-uid`, `as-groups`, `as-user-extra`."""
    headers: list[tuple[str, str]] = []
    name = _string(user, "as")
    if name:
        headers.append(("Impersonate-User", name))
    uid = _string(user, "as-uid")
    if uid:
        headers.append(("Impersonate-Uid", uid))
    groups = user.body.get("as-groups") or []
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise ClusterError(f"{user.where}.as-groups: not a list of strings",
                           subject=str(user.file))
    headers.extend(("Impersonate-Group", g) for g in groups)
    extra = user.body.get("as-user-extra") or {}
    if not isinstance(extra, Mapping) or not all(
            isinstance(v, list) and all(isinstance(x, str) for x in v) for v in extra.values()):
        raise ClusterError(f"{user.where}.as-user-extra: not a map of lists of strings",
                           subject=str(user.file))
    for key, values in extra.items():
        headers.extend((f"Impersonate-Extra-{quote(str(key), safe='')}", v) for v in values)
    if headers and not name:
        raise ClusterError(f"{user.where}: as-uid, as-groups or as-user-extra without `as` "
                           "(the user to impersonate)", subject=str(user.file))
    return tuple(headers)


# --- in a pod -------------------------------------------------------------------------------


def in_cluster(*, environ: Mapping[str, str] | None = None,
               directory: Path | None = None) -> Connection:
    """The connection of a pod: the service's address from the environment, the mounted
    service-account token and CA. Raises ClusterError when not in a cluster."""
    env = os.environ if environ is None else environ
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise ClusterError("not running in a cluster: KUBERNETES_SERVICE_HOST and "
                           "KUBERNETES_SERVICE_PORT must be set")
    if ":" in host:  # IPv6
        host = f"[{host}]"
    directory = SERVICE_ACCOUNT_DIR if directory is None else directory
    token, ca = directory / "token", directory / "ca.crt"
    if not ca.is_file():
        raise ClusterError("not running in a cluster: no service-account CA certificate",
                           subject=str(ca))
    tls = _tls_context(verify=True, ca_file=ca, ca_data=None,
                       problem=lambda reason: ClusterError(
                           f"not a usable CA certificate: {reason}", subject=str(ca)))
    server = f"https://{host}:{port}"
    return Connection(server=server, tls=tls, credentials=Credentials(token_file=token),
                      ca_origin=f"the service-account CA {ca}",
                      origin="in-cluster service account",
                      proxy=_proxy(server, env, None))
