"""A NATS JetStream cluster on loopback for the replicated-log tests and benchmarks: nats-server built
from the Go module proxy by ``tests/engine/build.sh`` on first use and cached by version; every node
started here and stopped (or SIGKILLed) by its own PID, its log and store in the caller's folder."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import grpc
from podfit.client import AsyncClient
from podfit.client.conformance import free_port
from podfit.client.errors import PodfitError

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "tests" / "engine" / "build.sh"


def nats_server() -> Path:
    """The nats-server binary, built on first use (stderr shows the build)."""
    done = subprocess.run([str(BUILD)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(done.stdout.strip().splitlines()[-1]) / "nats-server"


def stop(popen: subprocess.Popen[bytes] | None) -> None:
    """Stops the process this helper started, by its PID: TERM, then KILL after 10 s."""
    if popen is None or popen.poll() is not None:
        return
    popen.terminate()
    try:
        popen.wait(10)
    except subprocess.TimeoutExpired:
        popen.kill()
        popen.wait()


class EngineNode:
    def __init__(
        self,
        binary: Path,
        name: str,
        folder: Path,
        port: int,
        cluster_port: int,
        routes: list[int],
        sync_always: bool = False,
        tls: tuple[Path, Path, Path] | None = None,
    ) -> None:
        self.name, self.port, self.folder = name, port, folder
        self.config = folder / f"{name}.conf"
        self.log_path = folder / f"{name}.log"
        route_urls = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in routes)
        cluster = (
            # no_advertise: a client reaches the nodes at the URLs it was given, never at ones the cluster
            # tells it of (tests put a cuttable proxy in between, tests/cut_proxy.py).
            f"cluster {{ name: podfit, listen: 127.0.0.1:{cluster_port}, no_advertise: true, routes: [{route_urls}] }}"
            if routes
            else ""
        )
        # sync_interval always: every write flushed to disk before it is acknowledged (the default syncs every
        # two minutes and relies on the replicas), as etcd does (benchmarks/log_engines_bench.py).
        jetstream = f'store_dir: "{folder / name}"' + (", sync_interval: always" if sync_always else "")
        # tls: (certificate, key, CA) files; clients must present a certificate the CA signed (verify).
        client_tls = (
            f'tls {{ cert_file: "{tls[0]}", key_file: "{tls[1]}", ca_file: "{tls[2]}", verify: true }}\n' if tls else ""
        )
        self.config.write_text(
            f"server_name: {name}\nlisten: 127.0.0.1:{port}\njetstream {{ {jetstream} }}\n{client_tls}{cluster}\n"
        )
        self.binary = binary
        self.popen: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> EngineNode:
        with self.log_path.open("ab") as log:
            self.popen = subprocess.Popen([str(self.binary), "-c", str(self.config)], stdout=log, stderr=log)
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        if self.popen is not None and self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()

    def stop(self) -> None:
        stop(self.popen)

    def listening(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.2)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0


async def leaders(urls: str) -> set[str]:
    """The engine nodes leading the log's stream and the lease's bucket (podfit.server.transport.replicated)."""
    import nats

    connection = await nats.connect(urls.split(","))
    try:
        found = set()
        for stream in ("PODFIT_LOG", "KV_podfit_lease"):
            info = await connection.jetstream().stream_info(stream)
            assert info.cluster is not None and info.cluster.leader
            found.add(str(info.cluster.leader))
        return found
    finally:
        await connection.close()


class EngineCluster:
    """``size`` nats-server nodes with JetStream, clustered (routes on loopback) when more than one."""

    def __init__(
        self, folder: Path, size: int = 3, sync_always: bool = False, tls: tuple[Path, Path, Path] | None = None
    ) -> None:
        binary = nats_server()
        folder.mkdir(parents=True, exist_ok=True)
        ports = [free_port() for _ in range(size)]
        cluster_ports = [free_port() for _ in range(size)]
        self.nodes = [
            EngineNode(
                binary,
                f"n{i + 1}",
                folder,
                ports[i],
                cluster_ports[i],
                cluster_ports if size > 1 else [],
                sync_always,
                tls,
            )
            for i in range(size)
        ]

    @property
    def urls(self) -> str:
        return ",".join(node.url for node in self.nodes)

    def start(self, timeout: float = 20.0) -> EngineCluster:
        for node in self.nodes:
            node.start()
        deadline = time.monotonic() + timeout
        while not all(node.listening() for node in self.nodes):
            if time.monotonic() > deadline or not all(node.alive() for node in self.nodes):
                logs = "\n".join(node.log_path.read_text(errors="replace")[-2000:] for node in self.nodes)
                self.stop()
                raise AssertionError(f"the engine cluster did not start:\n{logs}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


@dataclass
class PodfitReplica:
    """One podfit-server replica on the replicated log, started and stopped (or SIGKILLed) by its PID."""

    name: str
    folder: Path
    engine: str
    key_file: Path
    port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    probe_port: int = field(default_factory=free_port)
    # The extender's HTTP listener, with the bind verb, on extender_port; off unless asked for.
    extender: bool = False
    extender_port: int = field(default_factory=free_port)
    lease_seconds: float = 2.0
    snapshot_entries: int = 40
    # The election and any other podfit-server flags: the engine's KV lease unless a test says otherwise
    # (tests/test_replicated_kube.py: a Lease), whatever machine the suite runs on.
    flags: tuple[str, ...] = ("--replication-election", "engine")
    popen: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.folder / f"{self.name}.log"

    def start(self) -> PodfitReplica:
        extender = ("--extender-addr", f"127.0.0.1:{self.extender_port}", "--extender-bind") if self.extender else ()
        argv = [
            *(sys.executable, "-m", "podfit.server.app", "--grpc-addr", self.address),
            *(extender or ("--extender-addr", "off")),
            *("--metrics-addr", "off", "--probe-addr", f"127.0.0.1:{self.probe_port}"),
            *("--replicated-log", self.engine, "--replica-addr", f"127.0.0.1:{self.peer_port}"),
            *("--replication-key-file", str(self.key_file), "--replication-lease-seconds", str(self.lease_seconds)),
            *("--replication-snapshot-entries", str(self.snapshot_entries), "--shutdown-grace-seconds", "2"),
            *self.flags,
        ]
        with self.log_path.open("ab") as log:
            log.write(b"--- start\n")
            log.flush()
            self.popen = subprocess.Popen(argv, stdout=log, stderr=log)
        return self

    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    def kill(self) -> None:
        if self.alive():
            assert self.popen is not None
            self.popen.send_signal(signal.SIGKILL)
            self.popen.wait()

    def stop(self) -> None:
        stop(self.popen)

    def log(self) -> str:
        """This process's log (since its last start)."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text.rpartition("--- start\n")[2]

    def owner(self) -> bool:
        return self.alive() and "is the owner" in self.log()

    def ready(self) -> int:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.probe_port}/readyz", timeout=1) as reply:
                return int(reply.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return 0


async def write_as_it_resumes(replica: PodfitReplica) -> grpc.StatusCode:
    """How a write is answered that a stopped (SIGSTOP) replica receives as it resumes (SIGCONT here): a
    deposed owner's cache takes it, and only the log can refuse it."""
    assert replica.popen is not None
    stray = AsyncClient(replica.address)
    call = asyncio.ensure_future(stray.apply([{"kind": "Namespace", "metadata": {"name": "stray"}}], timeout=10))
    try:
        await asyncio.sleep(0.2)
    finally:
        replica.popen.send_signal(signal.SIGCONT)
    try:
        await call
        return grpc.StatusCode.OK
    except PodfitError as exc:
        return exc.code
    finally:
        await stray.close()
