"""A NATS JetStream cluster on loopback for the replicated-log tests and benchmarks: nats-server built
from the Go module proxy by ``tests/engine/build.sh`` on first use and cached by version; every node
started here and stopped (or SIGKILLed) by its own PID, its log and store in the caller's folder."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

from podfit.client.conformance import free_port

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "tests" / "engine" / "build.sh"


def nats_server() -> Path:
    """The nats-server binary, built on first use (stderr shows the build)."""
    done = subprocess.run([str(BUILD)], check=True, stdout=subprocess.PIPE, text=True)
    return Path(done.stdout.strip().splitlines()[-1]) / "nats-server"


class EngineNode:
    def __init__(self, binary: Path, name: str, folder: Path, port: int, cluster_port: int, routes: list[int]) -> None:
        self.name, self.port, self.folder = name, port, folder
        self.config = folder / f"{name}.conf"
        self.log_path = folder / f"{name}.log"
        route_urls = ", ".join(f'"nats-route://127.0.0.1:{p}"' for p in routes)
        cluster = (
            f"cluster {{ name: podfit, listen: 127.0.0.1:{cluster_port}, routes: [{route_urls}] }}" if routes else ""
        )
        self.config.write_text(
            f'server_name: {name}\nlisten: 127.0.0.1:{port}\njetstream {{ store_dir: "{folder / name}" }}\n{cluster}\n'
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
        if self.popen is not None and self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(10)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()

    def listening(self) -> bool:
        with socket.socket() as sock:
            sock.settimeout(0.2)
            return sock.connect_ex(("127.0.0.1", self.port)) == 0


class EngineCluster:
    """``size`` nats-server nodes with JetStream, clustered (routes on loopback) when more than one."""

    def __init__(self, folder: Path, size: int = 3) -> None:
        binary = nats_server()
        folder.mkdir(parents=True, exist_ok=True)
        ports = [free_port() for _ in range(size)]
        cluster_ports = [free_port() for _ in range(size)]
        self.nodes = [
            EngineNode(binary, f"n{i + 1}", folder, ports[i], cluster_ports[i], cluster_ports if size > 1 else [])
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
