"""Real etcd, kube-apiserver and kube-scheduler processes on loopback, and podfit's server and feeder beside
them, for the end-to-end tests against the components users run.

The binaries are upstream's, built from the Go module proxy by ``tests/controlplane/build.sh`` on first use
and cached by version. Every process is started here and stopped by its own PID; logs go to files in the
test's folder, and a failure quotes their tails.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from podfit.client.conformance import free_port
from podfit.server.framework.versions import DEFAULT_VERSION, VERSIONS

from tests.conftest import issue_certificate, pem_bytes

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "tests" / "controlplane" / "build.sh"
DEPLOY = ROOT / "deploy" / "kubernetes"
# The control plane the suite runs: the release podfit answers as by default. The shadow check also runs
# each other supported release's kube-scheduler against it (each has its module, tests/controlplane/go/).
DEFAULT_RELEASE = VERSIONS[DEFAULT_VERSION].release
RELEASES = {name: version.release for name, version in VERSIONS.items()}
ADMIN_TOKEN = "podfit-e2e-admin"  # a test-only credential of a throwaway apiserver on loopback
SCHEDULER_TOKEN = "podfit-e2e-scheduler"
PODFIT_WRITE_TOKEN = "podfit-e2e-feeder"


def binaries(release: str, *commands: str) -> Path:
    """The folder holding ``commands`` of ``release``, built on first use (stderr shows the build)."""
    done = subprocess.run([str(BUILD), release, *commands], check=True, stdout=subprocess.PIPE, text=True)
    return Path(done.stdout.strip().splitlines()[-1])


def wait_for(what: str, check: Callable[[], T | None], timeout: float, interval: float = 0.05) -> T:
    """Polls ``check`` until it returns something truthy, and returns that; the last exception is quoted."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            value = check()
            if value:
                return value
        except Exception as exc:  # the check's own failures mean "not yet"
            last = exc
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}" + (f": {last!r}" if last else ""))


STARTED: list[Process] = []


def stop_started() -> None:
    """Stops every process started since the last call, newest first (clients before their servers)."""
    while STARTED:
        STARTED.pop().stop()


def http_status(url: str) -> int:
    """The HTTP status of a GET (0 when nothing answers): for probes that must not raise."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except OSError:
        return 0


class Process:
    """One child process with its log in a file; stopped by PID (SIGTERM, then SIGKILL)."""

    def __init__(self, name: str, argv: list[str], logs: Path, env: Mapping[str, str] | None = None) -> None:
        self.name = name
        self.argv = argv
        self.log_path = logs / f"{name}.log"
        self.env = {**os.environ, **(env or {})}
        self.popen: subprocess.Popen[bytes] | None = None

    def start(self) -> Process:
        log = self.log_path.open("ab")
        log.write(f"--- start {' '.join(self.argv)}\n".encode())
        log.flush()
        self.popen = subprocess.Popen(self.argv, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        log.close()
        if self not in STARTED:
            STARTED.append(self)
        return self

    @property
    def pid(self) -> int:
        assert self.popen is not None
        return self.popen.pid

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def stop(self, timeout: float = 15.0) -> int | None:
        if self.popen is None:
            return None
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        return self.popen.returncode

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def tail(self, lines: int = 40) -> str:
        return f"--- {self.name} (pid {self.popen.pid if self.popen else '-'}):\n" + "\n".join(
            self.log().splitlines()[-lines:]
        )


# -- certificates: the apiserver's serving certificate, podfit's, and the service-account signing key -----


class Pki:
    """A throwaway CA (the suite's own, ``tests.conftest``); leaf certificates for loopback (``localhost``
    and 127.0.0.1) signed by it, good as servers and as clients."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.key, self.cert = issue_certificate("podfit-e2e-ca", None, None, ca=True)
        self.ca = folder / "ca.crt"
        self.ca.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, name: str) -> tuple[Path, Path]:
        """(certificate, key) files for ``name``."""
        key_pem, cert_pem = pem_bytes(*issue_certificate(name, self.key, self.cert.subject, ca=False, loopback_ip=True))
        cert_path, key_path = self.folder / f"{name}.crt", self.folder / f"{name}.key"
        cert_path.write_bytes(cert_pem)
        key_path.write_bytes(key_pem)
        return cert_path, key_path


# -- etcd and kube-apiserver ------------------------------------------------------------------------------------


class ControlPlane:
    """etcd and kube-apiserver of one release, on loopback ports, with static tokens for the admin and the
    scheduler (system:kube-scheduler, bound by the bootstrap RBAC policy) and a service-account issuer."""

    def __init__(self, folder: Path, release: str = DEFAULT_RELEASE, apiserver_flags: Iterable[str] = ()) -> None:
        self.folder = folder
        self.release = release
        self.bin = binaries(release, "etcd", "kube-apiserver")
        self.logs = folder / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pki = Pki(folder / "pki")
        self.serving_cert, self.serving_key = self.pki.issue("kube-apiserver")
        sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.sa_key = folder / "pki" / "sa.key"
        self.sa_key.write_bytes(
            sa_key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        self.tokens = folder / "tokens.csv"
        self.tokens.write_text(
            f'{ADMIN_TOKEN},admin,admin,"system:masters"\n'
            f"{SCHEDULER_TOKEN},system:kube-scheduler,system:kube-scheduler\n"
        )
        self.etcd_port, self.etcd_peer_port, self.port = free_port(), free_port(), free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.etcd = Process(
            "etcd",
            [
                str(self.bin / "etcd"),
                "--name=podfit-e2e",
                f"--data-dir={folder / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{self.etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{self.etcd_peer_port}",
                f"--initial-cluster=podfit-e2e=http://127.0.0.1:{self.etcd_peer_port}",
                "--unsafe-no-fsync",  # a test cluster: durability across power loss is not the point
                "--log-level=warn",
            ],
            self.logs,
        )
        self.apiserver = Process(
            "kube-apiserver",
            [
                str(self.bin / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                "--endpoint-reconciler-type=none",  # loopback cannot be the kubernetes Service's endpoint
                f"--secure-port={self.port}",
                f"--tls-cert-file={self.serving_cert}",
                f"--tls-private-key-file={self.serving_key}",
                f"--token-auth-file={self.tokens}",
                "--authorization-mode=RBAC",
                f"--service-account-key-file={self.sa_key}",
                f"--service-account-signing-key-file={self.sa_key}",
                "--service-account-issuer=https://kubernetes.default.svc",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--v=1",
                *apiserver_flags,
            ],
            self.logs,
        )

    def start(self) -> ControlPlane:
        self.etcd.start()
        wait_for("etcd", lambda: self._etcd("/health").get("health") == "true", 30)
        self.start_apiserver()
        return self

    def start_apiserver(self) -> None:
        self.apiserver.start()
        try:
            wait_for("kube-apiserver /readyz", lambda: self.get("/readyz") == "ok", 60, interval=0.2)
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n{self.apiserver.tail()}\n{self.etcd.tail()}") from None

    def restart_apiserver(self) -> None:
        # With watches open it may not exit on SIGTERM alone; a short grace, then SIGKILL, as a kubelet does.
        self.apiserver.stop(timeout=3)
        self.start_apiserver()

    # -- access ----------------------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.pki.ca))

    def get(self, path: str, token: str = ADMIN_TOKEN) -> str:
        request = urllib.request.Request(self.url + path, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, timeout=5, context=self.ssl_context()) as response:
            return str(response.read().decode())

    def kubeconfig(self, name: str, token: str) -> Path:
        """A kubeconfig file that reaches this apiserver with ``token``."""
        path = self.folder / f"{name}.kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "e2e", "cluster": {"server": self.url, "certificate-authority": str(self.pki.ca)}}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": "e2e", "user": name}}],
            "current-context": name,
        }
        path.write_text(yaml.safe_dump(config))
        return path

    def api(self, token: str = ADMIN_TOKEN) -> Any:
        """A ``kubernetes.client.ApiClient`` with ``token``."""
        from kubernetes import client

        configuration = client.Configuration()
        configuration.host = self.url
        configuration.ssl_ca_cert = str(self.pki.ca)
        configuration.api_key = {"authorization": f"Bearer {token}"}
        return client.ApiClient(configuration)

    # -- etcd's own API (the v3 JSON gateway) -------------------------------------------------------------

    def _etcd(self, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.etcd_port}{path}", data=data)
        with urllib.request.urlopen(request, timeout=10) as response:
            return dict(json.loads(response.read()))

    def etcd_revision(self) -> int:
        key = base64.b64encode(b"/registry/").decode()
        return int(self._etcd("/v3/kv/range", {"key": key, "count_only": True})["header"]["revision"])

    def compact_etcd(self) -> int:
        """Compacts etcd's history up to its current revision, as the apiserver's compactor does every 5
        minutes; a watch from any older resourceVersion is then answered 410 Gone."""
        revision = self.etcd_revision()
        self._etcd("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision


# -- objects: what kube-apiserver needs that a double never asked for ------------------------------------------


def apply_manifests(api: Any, documents: Iterable[Mapping[str, Any]]) -> None:
    """Creates each object (``kubernetes.utils``' create_from_dict; an existing object is left alone)."""
    from kubernetes import utils
    from kubernetes.utils import FailToCreateError

    for document in documents:
        try:
            utils.create_from_dict(api, dict(document))
        except FailToCreateError as exc:
            if any(getattr(e, "status", None) != 409 for e in exc.api_exceptions):
                raise


def shipped(kind: str, name: str) -> dict[str, Any]:
    """One object of ``deploy/kubernetes/podfit.yaml``, as shipped."""
    for document in yaml.safe_load_all((DEPLOY / "podfit.yaml").read_text()):
        if document and document["kind"] == kind and document["metadata"]["name"] == name:
            return dict(document)
    raise KeyError(f"{kind}/{name} is not in deploy/kubernetes/podfit.yaml")


def service_account_token(api: Any, namespace: str, name: str) -> str:
    """A bound token for the ServiceAccount (the TokenRequest API, as a projected volume gets one)."""
    from kubernetes import client

    request = client.AuthenticationV1TokenRequest(spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=7200))
    response = client.CoreV1Api(api).create_namespaced_service_account_token(name, namespace, request)
    return str(response.status.token)


def ensure_namespace(api: Any, name: str) -> None:
    """The namespace and its ``default`` ServiceAccount, which the ServiceAccount admission plugin
    demands of every pod and which no controller-manager creates here."""
    apply_manifests(
        api,
        [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}},
        ],
    )


def make_ready(api: Any, node_name: str) -> None:
    """Removes the ``node.kubernetes.io/not-ready`` taint the apiserver's admission puts on every new Node,
    as the node lifecycle controller would once the node reports Ready (no such controller runs here)."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    node = core.read_node(node_name)
    taints = [t for t in node.spec.taints or [] if t.key != "node.kubernetes.io/not-ready"]
    core.patch_node(node_name, {"spec": {"taints": [api.sanitize_for_serialization(t) for t in taints] or None}})


def create_node(api: Any, manifest: Mapping[str, Any]) -> None:
    """Creates a Node with its status (capacity, allocatable, Ready), then makes it schedulable."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    core.create_node(dict(manifest))
    make_ready(api, manifest["metadata"]["name"])


def podfit_command() -> list[str]:
    return [str(Path(sys.executable).parent / "podfit")]


def podfit_server_command() -> list[str]:
    return [sys.executable, "-m", "podfit.server.app"]


# -- podfit beside it: the server as the manifests run it, and `podfit feed` ------------------------------------


class Podfit:
    """podfit-server as ``deploy/kubernetes/podfit.yaml`` runs it, on loopback: TLS with client certificates
    (mTLS) on gRPC and the extender, bearer tokens, the extender under ``/scheduler`` without bind, and
    unsynced until its feeder's first full sync. ``restart`` keeps the ports (a new epoch, an empty cache)."""

    def __init__(self, folder: Path, pki: Pki, *flags: str, name: str = "podfit") -> None:
        self.folder = folder
        self.logs = folder / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.pki = pki
        self.cert, self.key = pki.issue(name)
        self.client_cert, self.client_key = pki.issue(f"{name}-client")
        self.tokens = folder / f"{name}-tokens.csv"
        self.tokens.write_text(f"{PODFIT_WRITE_TOKEN},write,feeder\n")
        self.name, self.flags = name, flags
        self.process = self._on_free_ports()

    def _on_free_ports(self) -> Process:
        """The server's process, on ports free a moment ago (another process may take one meanwhile)."""
        self.target = f"127.0.0.1:{free_port()}"
        self.extender_port = free_port()
        self.probe_addr = f"127.0.0.1:{free_port()}"
        self.metrics_addr = f"127.0.0.1:{free_port()}"
        return Process(
            f"{self.name}-server",
            [
                *podfit_server_command(),
                f"--grpc-addr={self.target}",
                f"--extender-addr=127.0.0.1:{self.extender_port}",
                "--extender-url-prefix=/scheduler",
                "--no-extender-bind",
                f"--probe-addr={self.probe_addr}",
                f"--metrics-addr={self.metrics_addr}",
                f"--tls-cert-file={self.cert}",
                f"--tls-key-file={self.key}",
                f"--tls-client-ca-file={self.pki.ca}",
                f"--auth-tokens-file={self.tokens}",
                "--wait-for-sync",
                "--shutdown-delay-seconds=0",
                "--shutdown-grace-seconds=1",
                *self.flags,
            ],
            self.logs,
            env={"PODFIT_LOG_FORMAT": "text"},
        )

    @property
    def extender_url(self) -> str:
        return f"https://localhost:{self.extender_port}/scheduler"

    def channel(self) -> Any:
        from podfit.client._requests import ChannelConfig

        return ChannelConfig.from_files(
            self.target,
            token=PODFIT_WRITE_TOKEN,
            ca_file=str(self.pki.ca),
            cert_file=str(self.client_cert),
            key_file=str(self.client_key),
        )

    def client(self) -> Any:
        from podfit.client import Client

        return Client(config=self.channel())

    def start(self, *, new_ports: bool = True) -> Podfit:
        """Starts the server and waits for /healthz. A server that exits first fails at once, quoting its
        log; on a first start, one that exits because a port was taken meanwhile starts again on others."""
        self.process.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if self.probe("/healthz") == 200:
                    return self
            if not self.process.alive():
                if new_ports and "address already in use" in self.process.log().lower():
                    self.process = self._on_free_ports()
                    return self.start(new_ports=False)
                raise AssertionError(f"podfit-server exited before /healthz answered\n{self.process.tail()}")
            time.sleep(0.05)
        raise AssertionError(f"timed out after 30 s waiting for podfit-server /healthz\n{self.process.tail()}")

    def probe(self, path: str) -> int:
        return http_status(f"http://{self.probe_addr}{path}")

    def extender_requests(self, verb: str, code: str = "200") -> float:
        """``podfit_extender_requests_total`` for one verb and HTTP status, from /metrics."""
        with urllib.request.urlopen(f"http://{self.metrics_addr}/metrics", timeout=5) as response:
            text = response.read().decode()
        total = 0.0
        for line in text.splitlines():
            if (
                line.startswith("podfit_extender_requests_total{")
                and f'verb="{verb}"' in line
                and f'code="{code}"' in line
            ):
                total += float(line.rsplit(" ", 1)[1])
        return total

    def wait_synced(self, timeout: float = 60) -> None:
        wait_for("podfit's first full sync (/readyz)", lambda: self.probe("/readyz") == 200, timeout)

    def restart(self) -> None:
        self.process.stop()
        self.start(new_ports=False)


class Feeder:
    """``podfit feed`` with a kubeconfig of its own; its podfit token comes from the environment."""

    def __init__(self, podfit: Podfit, kubeconfig: Path, *flags: str, name: str = "podfit-feed") -> None:
        self.podfit = podfit
        self.process = Process(
            name,
            [
                *podfit_command(),
                "--target",
                podfit.target,
                "--ca-file",
                str(podfit.pki.ca),
                "--cert-file",
                str(podfit.client_cert),
                "--key-file",
                str(podfit.client_key),
                "feed",
                "--kubeconfig",
                str(kubeconfig),
                "--log-interval",
                "0",
                *flags,
            ],
            podfit.logs,
            env={"PODFIT_TOKEN": PODFIT_WRITE_TOKEN},
        )

    def start(self) -> Feeder:
        self.process.start()
        return self


class KubeScheduler:
    """Upstream's kube-scheduler with ``deploy/kubernetes/kube-scheduler-config.yaml`` as shipped, adapted only
    in addresses and credentials (or with no extender, for the shadow check)."""

    def __init__(
        self,
        control_plane: ControlPlane,
        folder: Path,
        *,
        release: str = DEFAULT_RELEASE,
        podfit: Podfit | None = None,
        node_cache_capable: bool = True,
    ) -> None:
        binary = binaries(release, "kube-scheduler") / "kube-scheduler"
        config = yaml.safe_load((DEPLOY / "kube-scheduler-config.yaml").read_text())
        config["clientConnection"]["kubeconfig"] = str(control_plane.kubeconfig("kube-scheduler", SCHEDULER_TOKEN))
        if podfit is None:
            del config["extenders"]
        else:
            extender = config["extenders"][0]
            extender["urlPrefix"] = podfit.extender_url
            extender["tlsConfig"] = {
                "caFile": str(podfit.pki.ca),
                "certFile": str(podfit.client_cert),
                "keyFile": str(podfit.client_key),
            }
            extender["nodeCacheCapable"] = node_cache_capable
        path = folder / f"kube-scheduler-{release}.yaml"
        path.write_text(yaml.safe_dump(config))
        folder.joinpath("logs").mkdir(parents=True, exist_ok=True)
        self.process = Process(
            f"kube-scheduler-{release}",
            [
                str(binary),
                f"--config={path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                "--v=2",
            ],
            folder / "logs",
        )

    def start(self) -> KubeScheduler:
        self.process.start()
        return self


class TcpProxy:
    """A loopback TCP relay to ``port`` that can be cut and restored: a network partition between one
    client (the feeder) and the apiserver, while everything else goes on. Clearing ``flowing`` stalls it
    instead (bytes held back, no reset, no refusal), until it is set again."""

    def __init__(self, port: int) -> None:
        self.flowing = threading.Event()
        self.flowing.set()
        self.upstream = port
        self.port = free_port()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._listener: socket.socket | None = None
        self.restore()

    def restore(self) -> None:
        listener = socket.create_server(("127.0.0.1", self.port))
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                downstream, _ = listener.accept()
            except OSError:
                return  # cut
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                downstream.close()
                continue
            with self._lock:
                self._sockets.update((downstream, upstream))
            for source, sink in ((downstream, upstream), (upstream, downstream)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self.flowing.wait()
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        """Refuses new connections and resets the open ones."""
        if self._listener is not None:
            with contextlib.suppress(OSError):
                self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept()
            self._listener.close()
            self._listener = None
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for end in sockets:
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            end.close()
