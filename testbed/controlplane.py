"""Test and dev infrastructure: runs a real etcd + kube-apiserver on loopback.

Never used by the agent at run time.

A :class:`ControlPlane` is what the test suite, the benchmarks and ``make run`` talk to:
etcd, kube-apiserver and optionally kube-controller-manager (garbage collection and
namespace deletion), each started in its own process group on free 127.0.0.1 ports, with
certificates from :mod:`orksync.secrets.pki`, logs and data in one temporary directory.
There is no kubelet and no scheduler: nothing runs, no status is ever written by Kubernetes.
The recipe is ``docs/test-control-plane.md``; the binaries come from
``hack/build-control-plane.sh`` (see :func:`find_binaries`).

In Python::

    with ControlPlane(controller_manager=True) as cp:
        with cp.api_client() as client:
            CoreV1Api(client).list_namespace()

From a shell (``make run``)::

    python -m testbed.controlplane build
    python -m testbed.controlplane up --kubeconfig PATH [--state-dir DIR] \
        [--controller-manager]
    python -m testbed.controlplane down [--state-dir DIR]
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING

from orksync.secrets import pki

if TYPE_CHECKING:
    import kubernetes.client

__all__ = [
    "BIN_ENV_VARS",
    "CONTEXT_NAME",
    "ControlPlane",
    "ControlPlaneError",
    "ProcessInfo",
    "find_binaries",
    "main",
    "repository_root",
]

BIN_ENV_VARS = ("ORKSYNC_CONTROL_PLANE_BIN", "KUBEBUILDER_ASSETS")
"""Environment variables that may point at a directory with ready-made binaries."""
CONTEXT_NAME = "orksync-local"
"""Name of the cluster, user and context in the kubeconfig a :class:`ControlPlane` writes."""

REQUIRED_BINARIES = ("etcd", "kube-apiserver")
CONTROLLERS = "garbage-collector-controller,namespace-controller"
STOP_TIMEOUT = 10.0
LOG_TAIL_LINES = 30
STATE_FILE = "state.json"
CERT_VALIDITY = timedelta(days=30)
# The Services' cluster IPs: a /16 (65,533 Services), so that benches with a Service per
# custom resource (hundreds, thousands) do not run out of addresses as a /24's 253 did.
SERVICE_RANGE = "10.0.0.0/16"
_POLL_FIRST = 0.05
_POLL_MAX = 0.5


class ControlPlaneError(RuntimeError):
    """The local control plane could not be found, built, started or stopped."""


@dataclass(frozen=True)
class ProcessInfo:
    """One running component: enough to stop it from another process (``down``)."""

    component: str
    pid: int
    executable: str


# --- binaries ------------------------------------------------------------------------------


def repository_root() -> Path:
    """The repository root: the parent of this ``testbed`` directory."""
    return Path(__file__).resolve().parent.parent


def find_binaries(
    *,
    environ: Mapping[str, str] | None = None,
    build_timeout: float = 7200.0,
    show_build_log: bool = False,
) -> Path:
    """Return a directory holding executable ``etcd`` and ``kube-apiserver``.

    Uses ``$ORKSYNC_CONTROL_PLANE_BIN`` or ``$KUBEBUILDER_ASSETS`` when one points at such a
    directory; otherwise runs ``hack/build-control-plane.sh`` (instant once cached, about 25
    minutes cold) and takes the last line of its stdout. ``show_build_log`` lets the script's
    progress go to this process's stderr instead of being captured.
    """
    env = os.environ if environ is None else environ
    for var in BIN_ENV_VARS:
        candidate = env.get(var, "")
        if candidate and _has_binaries(Path(candidate)):
            return Path(candidate)
    return _run_build_script(dict(env), build_timeout, show_build_log)


def _has_binaries(directory: Path) -> bool:
    return all(
        os.access(directory / name, os.X_OK) and (directory / name).is_file()
        for name in REQUIRED_BINARIES
    )


def _run_build_script(env: dict[str, str], timeout: float, show_build_log: bool) -> Path:
    script = repository_root() / "hack" / "build-control-plane.sh"
    if not script.is_file():
        raise ControlPlaneError(f"control-plane build script not found at {script}")
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(
            ["bash", str(script)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None if show_build_log else err,
            env=env,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
        except BaseException:
            _kill_group(proc.pid, signal.SIGKILL)
            proc.wait()
            raise ControlPlaneError(
                f"{script.name} did not finish within {timeout:.0f}s (killed)"
            ) from None
        err.seek(0)
        stderr_tail = _tail_text(err.read().decode(errors="replace"))
    return _bin_dir_from_output(script, proc.returncode, out.decode(errors="replace"), stderr_tail)


def _bin_dir_from_output(script: Path, returncode: int, stdout: str, stderr_tail: str) -> Path:
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    detail = f"\n--- last lines of its stderr ---\n{stderr_tail}" if stderr_tail else ""
    if returncode != 0:
        raise ControlPlaneError(f"{script.name} failed with exit code {returncode}{detail}")
    if not lines or not _has_binaries(Path(lines[-1])):
        last = lines[-1] if lines else "<no output>"
        raise ControlPlaneError(
            f"{script.name} printed {last!r} on its last line, not a directory with "
            f"{' and '.join(REQUIRED_BINARIES)}{detail}"
        )
    return Path(lines[-1])


# --- processes -----------------------------------------------------------------------------


def _kill_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _tail_text(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


def _tail_file(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - 64 * 1024))
            return _tail_text(f.read().decode(errors="replace"), lines)
    except OSError as exc:
        return f"<cannot read {path}: {exc}>"


def _terminate_with_parent() -> None:
    """In the child before exec: SIGKILL when the process that started us dies, so a test
    run killed with SIGKILL leaves no etcd or kube-apiserver behind (Linux prctl)."""
    import ctypes

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


_spawner: ThreadPoolExecutor | None = None
_spawner_lock = threading.Lock()


def _from_spawner_thread(start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Run `start` on one thread that lives as long as the process: ``PR_SET_PDEATHSIG``
    fires when the *thread* that forked the child ends, so a component started from a
    short-lived thread (a test's worker thread) would be killed with it."""
    global _spawner
    with _spawner_lock:
        if _spawner is None:
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="control-plane")
    return _spawner.submit(start).result()


class _Component:
    """One child process: started in its own session, output appended to its log file."""

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, cwd: Path, *,
                 die_with_parent: bool = True) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self.cwd = cwd
        self.die_with_parent = die_with_parent
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log_path.open("ab") as log:
            stamp = datetime.now(UTC).isoformat(timespec="seconds")
            log.write(f"\n=== orksync: starting {self.name} at {stamp}\n".encode())
            log.flush()
            def popen() -> subprocess.Popen[bytes]:
                return subprocess.Popen(
                    self.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.cwd,
                    start_new_session=True,
                    preexec_fn=_terminate_with_parent if self.die_with_parent else None,
                )

            try:
                self.popen = _from_spawner_thread(popen) if self.die_with_parent else popen()
            except OSError as exc:
                raise ControlPlaneError(
                    f"cannot start {self.name} ({self.argv[0]}): {exc}"
                ) from exc

    def exit_code(self) -> int | None:
        """None while running (or never started); the exit status once it ended."""
        return None if self.popen is None else self.popen.poll()

    def check_alive(self) -> None:
        code = self.exit_code()
        if self.popen is None or code is not None:
            raise ControlPlaneError(f"{self.name} exited with code {code}")

    def stop(self, timeout: float = STOP_TIMEOUT, *, graceful: bool = True) -> None:
        """SIGTERM its process group, wait up to ``timeout``, then SIGKILL.

        With ``graceful=False``: SIGKILL at once (a crash).
        """
        if self.popen is None:
            return
        proc, self.popen = self.popen, None
        if proc.poll() is None:
            _kill_group(proc.pid, signal.SIGTERM if graceful else signal.SIGKILL)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                _kill_group(proc.pid, signal.SIGKILL)
                proc.wait()

    def info(self) -> ProcessInfo | None:
        if self.popen is None or self.popen.poll() is not None:
            return None
        return ProcessInfo(component=self.name, pid=self.popen.pid, executable=self.argv[0])


def _poll_until(
    what: str,
    timeout: float,
    check: Callable[[], str | None],
    alive: Sequence[_Component] = (),
) -> None:
    """Call ``check`` until it returns None (ready), with a deadline; ``check`` returns why not yet.

    Fails at once if a component in ``alive`` has exited.
    """
    deadline = time.monotonic() + timeout
    delay = _POLL_FIRST
    while True:
        for component in alive:
            component.check_alive()
        reason = check() or ""
        if not reason:
            return
        if time.monotonic() >= deadline:
            raise ControlPlaneError(
                f"{what} did not become ready within {timeout:.0f}s (last: {reason})"
            )
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, _POLL_MAX)


def _http_get(conn: http.client.HTTPConnection, path: str) -> tuple[int, str]:
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, response.read(2000).decode(errors="replace")
    except (OSError, http.client.HTTPException) as exc:
        return 0, f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()


def _free_ports(count: int) -> list[int]:
    """Distinct free loopback ports (held together while choosing, so they differ)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


# --- files -----------------------------------------------------------------------------------


AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  # Secret writes with their responses: where generated values are allowed to be.
  - level: RequestResponse
    verbs: [create, update, patch]
    resources: [{group: "", resources: [secrets]}]
  # Every other write with its body (objects, status subresources, Events), and deletes.
  - level: Request
    verbs: [create, update, patch, delete, deletecollection]
  # The reads of one test-only kind (no bodies): who lists it, by which label selector
  # (tests/agent/test_scaleout_cluster.py; no other test uses the group).
  - level: Metadata
    verbs: [list, watch]
    resources: [{group: reads.orksync.io, resources: [gadgets]}]
  - level: None
"""


@dataclass(frozen=True)
class _Paths:
    root: Path

    @property
    def pki(self) -> Path:
        return self.root / "pki"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def etcd_data(self) -> Path:
        return self.root / "etcd-data"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    def cert(self, name: str) -> Path:
        return self.pki / f"{name}.crt"

    def key(self, name: str) -> Path:
        return self.pki / f"{name}.key"


@dataclass(frozen=True)
class _Credentials:
    ca_pem: bytes
    serving_cert_pem: bytes
    serving_key_pem: bytes
    admin_cert_pem: bytes
    admin_key_pem: bytes
    sa_private_pem: bytes
    sa_public_pem: bytes


def _make_credentials(now: datetime) -> _Credentials:
    ca = pki.create_ca(common_name="orksync-local-ca", now=now, validity=CERT_VALIDITY)
    serving_key = pki.generate_private_key()
    serving = pki.issue_certificate(
        ca,
        serving_key,
        common_name="localhost",
        now=now,
        validity=CERT_VALIDITY,
        dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
        ip_addresses=("127.0.0.1",),
        extended_usages=("server_auth",),
    )
    admin_key = pki.generate_private_key()
    admin = pki.issue_certificate(
        ca,
        admin_key,
        common_name="orksync-admin",
        organizations=("system:masters",),
        now=now,
        validity=CERT_VALIDITY,
        extended_usages=("client_auth",),
    )
    sa_key = pki.generate_private_key("rsa", rsa_key_size=2048)
    return _Credentials(
        ca_pem=ca.certificate.pem,
        serving_cert_pem=serving.pem,
        serving_key_pem=serving_key.pem(),
        admin_cert_pem=admin.pem,
        admin_key_pem=admin_key.pem(),
        sa_private_pem=sa_key.pem(),
        sa_public_pem=sa_key.public_pem(),
    )


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def _write_credentials(paths: _Paths, creds: _Credentials) -> None:
    paths.pki.mkdir(mode=0o700)
    files = {
        paths.cert("ca"): creds.ca_pem,
        paths.cert("serving"): creds.serving_cert_pem,
        paths.key("serving"): creds.serving_key_pem,
        paths.cert("admin"): creds.admin_cert_pem,
        paths.key("admin"): creds.admin_key_pem,
        paths.key("service-account"): creds.sa_private_pem,
        paths.pki / "service-account.pub": creds.sa_public_pem,
    }
    for path, data in files.items():
        _write_private(path, data)


def kubeconfig_document(
    server: str, ca_pem: bytes, cert_pem: bytes, key_pem: bytes
) -> dict[str, object]:
    """A kubeconfig with embedded credentials; cluster, user and context ``orksync-local``."""

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT_NAME,
                "cluster": {"server": server, "certificate-authority-data": b64(ca_pem)},
            }
        ],
        "users": [
            {
                "name": CONTEXT_NAME,
                "user": {"client-certificate-data": b64(cert_pem), "client-key-data": b64(key_pem)},
            }
        ],
        "contexts": [
            {"name": CONTEXT_NAME, "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME}}
        ],
        "current-context": CONTEXT_NAME,
        "preferences": {},
    }


def write_kubeconfig(path: Path, document: Mapping[str, object]) -> None:
    """Write a kubeconfig (JSON is valid YAML; kubectl and the Python client read it), mode 0600."""
    _write_private(path, (json.dumps(document, indent=2) + "\n").encode())


# --- the control plane -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Ports:
    etcd_client: int
    etcd_peer: int
    apiserver: int
    controller_manager: int


class ControlPlane:
    """etcd + kube-apiserver (+ kube-controller-manager) on loopback; a context manager.

    ``bin_dir``: where the binaries are (default: :func:`find_binaries`).
    ``controller_manager``: also run kube-controller-manager (garbage collector and
    namespace controller).
    ``work_dir``: directory for certificates, etcd data and logs; must be absent or empty
    (default: a new temporary directory). It is removed by :meth:`stop` unless ``keep``.
    ``ready_timeout``: seconds each component may take to become ready.
    ``audit_log``: write kube-apiserver's audit log there (JSON lines, see
    :data:`AUDIT_POLICY`): the bodies of every write, and the responses of Secret writes.
    The test suite scans it for leaked secret values (tests/leakscan.py).
    ``audit_policy``: the audit policy's YAML instead of :data:`AUDIT_POLICY` (the
    benchmarks log the metadata of every request, reads included).
    """

    def __init__(
        self,
        *,
        bin_dir: Path | None = None,
        controller_manager: bool = False,
        keep: bool = False,
        work_dir: Path | None = None,
        ready_timeout: float = 90.0,
        audit_log: Path | None = None,
        audit_policy: str = AUDIT_POLICY,
    ) -> None:
        self._bin_dir = bin_dir
        self.audit_log = audit_log
        self._audit_policy = audit_policy
        self._want_controller_manager = controller_manager
        self._keep = keep
        self.detached = False  # True: processes outlive this Python process (`up`)
        self._requested_work_dir = work_dir
        self._ready_timeout = ready_timeout
        self._paths: _Paths | None = None
        self._ports: _Ports | None = None
        self._creds: _Credentials | None = None
        self._components: dict[str, _Component] = {}

    # lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        """Start every component and wait until the API answers.

        Raises :class:`ControlPlaneError` (with each component's log tail) on failure.
        """
        if self._components:
            raise ControlPlaneError("control plane already started")
        bin_dir = self._bin_dir if self._bin_dir is not None else find_binaries()
        self._bin_dir = bin_dir
        self._check_binaries(bin_dir)
        self._paths = _Paths(self._make_work_dir())
        self._paths.logs.mkdir()
        self._guarded("start", self._start_all)

    def stop(self) -> None:
        """Stop its own processes, newest first; remove the work dir unless ``keep``."""
        for component in reversed(list(self._components.values())):
            component.stop()
        self._components.clear()
        if self._paths is not None and not self._keep:
            shutil.rmtree(self._paths.root, ignore_errors=True)

    def restart_apiserver(self, *, graceful: bool = True) -> None:
        """Stop kube-apiserver and start it again on the same port and etcd; wait until ready.

        ``graceful=False`` kills it with SIGKILL (a crash) instead of SIGTERM (about 1 s).
        """
        self._guarded(
            "restart kube-apiserver",
            lambda: self._restart("kube-apiserver", graceful, self._wait_apiserver),
        )

    def restart_etcd(self, *, graceful: bool = True) -> None:
        """Stop etcd and start it again on the same ports and data; wait until the API is ready.

        A graceful etcd stop takes about 7 s while kube-apiserver holds watches on it;
        ``graceful=False`` kills it with SIGKILL (a crash) instead. Writes acknowledged before
        a kill survive only thanks to the OS page cache (etcd runs with ``--unsafe-no-fsync``).
        """

        def wait() -> None:
            self._wait_etcd()
            self._wait_apiserver()

        self._guarded("restart etcd", lambda: self._restart("etcd", graceful, wait))

    def kill(self, component: str) -> None:
        """SIGKILL one component (``etcd``, ``kube-apiserver``, ...) and leave it down, as
        a crash would; :meth:`revive` starts it again. For fault-injection tests."""
        known = self._components.get(component)
        if known is None:
            raise ControlPlaneError(f"{component} is not part of this control plane")
        known.stop(graceful=False)

    def revive(self, component: str) -> None:
        """Start a component stopped by :meth:`kill` again, on the same ports and data, and
        wait until it (and the API) is ready. Any thread may call it: children are forked
        from one long-lived thread (``PR_SET_PDEATHSIG`` follows the forking thread)."""
        known = self._components.get(component)
        if known is None:
            raise ControlPlaneError(f"{component} is not part of this control plane")
        def start() -> None:
            known.start()
            if component == "etcd":
                self._wait_etcd()
            if component == "kube-controller-manager":
                self._wait_controller_manager()
            else:
                self._wait_apiserver()

        self._guarded(f"revive {component}", start)

    # accessors ---------------------------------------------------------------------------

    @property
    def kubeconfig(self) -> Path:
        """Kubeconfig with embedded admin credentials (context ``orksync-local``)."""
        return self._started_paths().kubeconfig

    @property
    def server(self) -> str:
        """``https://127.0.0.1:PORT`` of kube-apiserver."""
        return f"https://127.0.0.1:{self._started_ports().apiserver}"

    @property
    def etcd_url(self) -> str:
        """``http://127.0.0.1:PORT`` of etcd's client endpoint."""
        return f"http://127.0.0.1:{self._started_ports().etcd_client}"

    @property
    def ca_pem(self) -> bytes:
        return self._started_creds().ca_pem

    @property
    def admin_cert_pem(self) -> bytes:
        """Client certificate of ``orksync-admin`` in group ``system:masters``."""
        return self._started_creds().admin_cert_pem

    @property
    def admin_key_pem(self) -> bytes:
        return self._started_creds().admin_key_pem

    @property
    def sa_signing_key(self) -> Path:
        """PEM private key kube-apiserver signs service-account tokens with."""
        return self._started_paths().key("service-account")

    @property
    def bin_dir(self) -> Path:
        if self._bin_dir is None:
            raise ControlPlaneError("control plane not started: no binaries chosen yet")
        return self._bin_dir

    @property
    def log_dir(self) -> Path:
        """One ``<component>.log`` per component."""
        return self._started_paths().logs

    @property
    def work_dir(self) -> Path:
        return self._started_paths().root

    def processes(self) -> list[ProcessInfo]:
        """The components running now, in start order."""
        infos = (component.info() for component in self._components.values())
        return [info for info in infos if info is not None]

    def api_client(self) -> kubernetes.client.ApiClient:
        """A new ApiClient on a new Configuration (the client's global default is never touched)."""
        import kubernetes.client

        paths = self._started_paths()
        config = kubernetes.client.Configuration()
        config.host = self.server
        config.verify_ssl = True
        config.ssl_ca_cert = str(paths.cert("ca"))
        config.cert_file = str(paths.cert("admin"))
        config.key_file = str(paths.key("admin"))
        return kubernetes.client.ApiClient(configuration=config)

    def log_tails(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last ``lines`` lines of each component's log, for error messages."""
        if self._paths is None or not self._paths.logs.is_dir():
            return ""
        return "\n".join(
            f"--- last lines of {log.name} ---\n{_tail_file(log, lines)}"
            for log in sorted(self._paths.logs.glob("*.log"))
        )

    # internals ---------------------------------------------------------------------------

    def _guarded(self, action: str, body: Callable[[], None]) -> None:
        """Run ``body``; on failure stop everything and raise with each component's log tail."""
        try:
            body()
        except BaseException as exc:
            tails = self.log_tails()
            self.stop()
            if isinstance(exc, ControlPlaneError | OSError | subprocess.SubprocessError):
                raise ControlPlaneError(
                    f"local control plane: cannot {action}: {exc}\n{tails}"
                ) from exc
            raise

    def _start_all(self) -> None:
        paths = self._started_paths()
        ports = _free_ports(4)
        self._ports = _Ports(*ports)
        self._creds = _make_credentials(datetime.now(UTC))
        _write_credentials(paths, self._creds)
        write_kubeconfig(
            paths.kubeconfig,
            kubeconfig_document(
                self.server,
                self._creds.ca_pem,
                self._creds.admin_cert_pem,
                self._creds.admin_key_pem,
            ),
        )
        self._launch("etcd", self._etcd_argv(), self._wait_etcd)
        self._launch("kube-apiserver", self._apiserver_argv(), self._wait_apiserver)
        if self._want_controller_manager:
            self._launch(
                "kube-controller-manager",
                self._controller_manager_argv(),
                self._wait_controller_manager,
            )

    def _launch(self, name: str, argv: list[str], wait: Callable[[], None]) -> None:
        component = _Component(
            name, argv, self._started_paths().logs / f"{name}.log", self._started_paths().root,
            die_with_parent=not self.detached,
        )
        self._components[name] = component
        component.start()
        wait()

    def _restart(self, name: str, graceful: bool, wait: Callable[[], None]) -> None:
        component = self._components.get(name)
        if component is None:
            raise ControlPlaneError(f"{name} is not running")
        component.stop(graceful=graceful)
        component.start()
        wait()

    def _check_binaries(self, bin_dir: Path) -> None:
        needed = list(REQUIRED_BINARIES) + (
            ["kube-controller-manager"] if self._want_controller_manager else []
        )
        missing = [name for name in needed if not os.access(bin_dir / name, os.X_OK)]
        if missing:
            raise ControlPlaneError(f"no executable {', '.join(missing)} in {bin_dir}")

    def _make_work_dir(self) -> Path:
        if self._requested_work_dir is None:
            return Path(tempfile.mkdtemp(prefix="orksync-cp-"))
        root = self._requested_work_dir
        if root.exists() and any(root.iterdir()):
            raise ControlPlaneError(f"work dir {root} is not empty")
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        return root

    def _started_paths(self) -> _Paths:
        if self._paths is None:
            raise ControlPlaneError("control plane not started")
        return self._paths

    def _started_ports(self) -> _Ports:
        if self._ports is None:
            raise ControlPlaneError("control plane not started")
        return self._ports

    def _started_creds(self) -> _Credentials:
        if self._creds is None:
            raise ControlPlaneError("control plane not started")
        return self._creds

    def _binary(self, name: str) -> str:
        return str(self.bin_dir / name)

    # component command lines -------------------------------------------------------------

    def _etcd_argv(self) -> list[str]:
        ports, paths = self._started_ports(), self._started_paths()
        client, peer = (
            f"http://127.0.0.1:{ports.etcd_client}",
            f"http://127.0.0.1:{ports.etcd_peer}",
        )
        return [
            self._binary("etcd"),
            "--name=orksync",
            f"--data-dir={paths.etcd_data}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=orksync={peer}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync=true",
        ]

    def _apiserver_argv(self) -> list[str]:
        ports, paths = self._started_ports(), self._started_paths()
        return [
            self._binary("kube-apiserver"),
            f"--etcd-servers={self.etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={ports.apiserver}",
            f"--cert-dir={paths.root / 'apiserver-certs'}",
            f"--tls-cert-file={paths.cert('serving')}",
            f"--tls-private-key-file={paths.key('serving')}",
            f"--client-ca-file={paths.cert('ca')}",
            "--authorization-mode=RBAC",
            f"--service-account-issuer={self.server}/",
            f"--service-account-key-file={paths.pki / 'service-account.pub'}",
            f"--service-account-signing-key-file={paths.key('service-account')}",
            f"--service-cluster-ip-range={SERVICE_RANGE}",
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
            # Without a bound, SIGTERM waits for kube-controller-manager's watches to end (minutes).
            "--shutdown-watch-termination-grace-period=1s",
            *self._audit_argv(paths),
        ]

    def _audit_argv(self, paths: _Paths) -> list[str]:
        if self.audit_log is None:
            return []
        policy = paths.root / "audit-policy.yaml"
        policy.write_text(self._audit_policy)
        return [f"--audit-policy-file={policy}", f"--audit-log-path={self.audit_log}",
                "--audit-log-format=json", "--audit-log-maxsize=0", "--audit-log-mode=blocking"]

    def _controller_manager_argv(self) -> list[str]:
        ports, paths = self._started_ports(), self._started_paths()
        return [
            self._binary("kube-controller-manager"),
            f"--kubeconfig={paths.kubeconfig}",
            f"--authentication-kubeconfig={paths.kubeconfig}",
            f"--authorization-kubeconfig={paths.kubeconfig}",
            f"--controllers={CONTROLLERS}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.controller_manager}",
            f"--tls-cert-file={paths.cert('serving')}",
            f"--tls-private-key-file={paths.key('serving')}",
            f"--root-ca-file={paths.cert('ca')}",
            f"--service-account-private-key-file={paths.key('service-account')}",
            "--use-service-account-credentials=false",
        ]

    # readiness ---------------------------------------------------------------------------

    def _tls_context(self, client_cert: bool) -> ssl.SSLContext:
        paths = self._started_paths()
        context = ssl.create_default_context(cafile=str(paths.cert("ca")))
        if client_cert:
            context.load_cert_chain(str(paths.cert("admin")), str(paths.key("admin")))
        return context

    def _wait_etcd(self) -> None:
        port = self._started_ports().etcd_client

        def check() -> str | None:
            status, body = _http_get(
                http.client.HTTPConnection("127.0.0.1", port, timeout=2), "/health"
            )
            return (
                None
                if status == 200 and '"health":"true"' in body.replace(" ", "")
                else f"/health: {status} {body[:200]}"
            )

        _poll_until("etcd", self._ready_timeout, check, [self._components["etcd"]])

    def _wait_apiserver(self) -> None:
        port, context = self._started_ports().apiserver, self._tls_context(client_cert=True)

        def check() -> str | None:
            for path in ("/readyz", "/api/v1/namespaces/default"):
                conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
                status, body = _http_get(conn, path)
                if status != 200:
                    return f"GET {path}: {status} {body[:300]}"
            return None

        alive = [self._components[name] for name in ("etcd", "kube-apiserver")]
        _poll_until("kube-apiserver", self._ready_timeout, check, alive)

    def _wait_controller_manager(self) -> None:
        port, context = (
            self._started_ports().controller_manager,
            self._tls_context(client_cert=False),
        )

        def check() -> str | None:
            conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=5, context=context)
            status, body = _http_get(conn, "/healthz")
            return None if status == 200 else f"GET /healthz: {status} {body[:300]}"

        _poll_until(
            "kube-controller-manager", self._ready_timeout, check, list(self._components.values())
        )


# --- CLI: up / down / build ----------------------------------------------------------------


def _default_state_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"orksync-control-plane-{os.getuid()}"


def _state_path(state_dir: Path) -> Path:
    return state_dir / STATE_FILE


def _pid_is_ours(info: ProcessInfo) -> bool:
    """True while ``info.pid`` runs ``info.executable`` and is no zombie (guards pid reuse)."""
    try:
        cmdline = (
            Path(f"/proc/{info.pid}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        )
        state = Path(f"/proc/{info.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return cmdline == info.executable and state != "Z"


def _terminate(info: ProcessInfo, timeout: float = STOP_TIMEOUT) -> None:
    if not _pid_is_ours(info):
        return
    _kill_group(info.pid, signal.SIGTERM)
    try:
        _poll_until(
            info.component, timeout, lambda: "still running" if _pid_is_ours(info) else None
        )
    except ControlPlaneError:
        _kill_group(info.pid, signal.SIGKILL)


def _read_state(state_dir: Path) -> dict[str, object] | None:
    try:
        return dict(json.loads(_state_path(state_dir).read_text()))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise ControlPlaneError(f"unreadable state file {_state_path(state_dir)}: {exc}") from exc


def _state_processes(state: Mapping[str, object]) -> list[ProcessInfo]:
    raw = state.get("processes", [])
    return [ProcessInfo(**item) for item in raw] if isinstance(raw, list) else []


def control_plane_down(state_dir: Path) -> bool:
    """Stop a control plane started by ``up`` with this state dir; False if none was recorded."""
    state = _read_state(state_dir)
    if state is None:
        return False
    for info in reversed(_state_processes(state)):
        _terminate(info)
    work_dir = state.get("work_dir")
    if isinstance(work_dir, str):
        shutil.rmtree(work_dir, ignore_errors=True)
    _state_path(state_dir).unlink(missing_ok=True)
    return True


def control_plane_running(state_dir: Path) -> str | None:
    """The server URL of the control plane ``up`` started with this state dir, if it runs."""
    state = _read_state(state_dir.resolve())
    if state is not None and all(_pid_is_ours(info) for info in _state_processes(state)):
        return str(state.get("server", ""))
    return None


def control_plane_up(kubeconfig: Path, state_dir: Path, controller_manager: bool) -> ControlPlane:
    """Start a detached control plane; copy its kubeconfig; record it in ``state_dir``."""
    kubeconfig, state_dir = kubeconfig.resolve(), state_dir.resolve()
    state = _read_state(state_dir)
    if state is not None:
        if any(_pid_is_ours(info) for info in _state_processes(state)):
            raise ControlPlaneError(
                f"a control plane from {state_dir} is already running; run 'down' first"
            )
        control_plane_down(state_dir)  # stale: clean it up
    work_dir = state_dir / "control-plane"
    shutil.rmtree(work_dir, ignore_errors=True)  # left by a crashed 'up'; only ever ours
    state_dir.mkdir(parents=True, exist_ok=True)
    cp = ControlPlane(controller_manager=controller_manager, work_dir=work_dir)
    cp.detached = True  # `up` returns and leaves the processes running
    cp.start()
    try:
        kubeconfig.parent.mkdir(parents=True, exist_ok=True)
        write_kubeconfig(kubeconfig, json.loads(cp.kubeconfig.read_text()))
        record = {
            "work_dir": str(cp.work_dir),
            "kubeconfig": str(kubeconfig.resolve()),
            "server": cp.server,
            "log_dir": str(cp.log_dir),
            "processes": [asdict(info) for info in cp.processes()],
        }
        tmp = _state_path(state_dir).with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2) + "\n")
        tmp.replace(_state_path(state_dir))
    except BaseException:
        cp.stop()
        raise
    return cp


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m testbed.controlplane",
        description="Local etcd + kube-apiserver for tests and `make run` (not for the agent).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start a detached control plane and write its kubeconfig")
    up.add_argument("--kubeconfig", type=Path, required=True, help="where to write the kubeconfig")
    up.add_argument(
        "--state-dir",
        type=Path,
        default=_default_state_dir(),
        help="pids, certificates, data, logs",
    )
    up.add_argument(
        "--controller-manager", action="store_true", help="also run kube-controller-manager"
    )
    up.add_argument(
        "--reuse", action="store_true",
        help="if a control plane from this state dir is running, keep it and succeed",
    )
    down = sub.add_parser("down", help="stop the control plane started by 'up'")
    down.add_argument("--state-dir", type=Path, default=_default_state_dir())
    sub.add_parser("build", help="build (or find) the binaries and print their directory")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, out: IO[str] = sys.stdout) -> int:
    """CLI entry point; returns the exit code."""
    args = _parse_args(argv)
    try:
        if args.command == "build":
            print(find_binaries(show_build_log=True), file=out)
        elif args.command == "up":
            running = control_plane_running(args.state_dir) if args.reuse else None
            if running and args.kubeconfig.exists():
                print(f"control plane already up at {running}; kubeconfig {args.kubeconfig}",
                      file=out)
                return 0
            cp = control_plane_up(args.kubeconfig, args.state_dir, args.controller_manager)
            print(
                f"control plane up at {cp.server}; kubeconfig {args.kubeconfig}; logs {cp.log_dir}",
                file=out,
            )
        elif not control_plane_down(args.state_dir.resolve()):
            print(f"no control plane recorded in {args.state_dir}", file=out)
    except ControlPlaneError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
