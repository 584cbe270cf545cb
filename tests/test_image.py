"""podfit's container image, built for real from deploy/Containerfile by deploy/image/build.sh (podman; a
debootstrap'd Debian base where no registry can be reached) and run: its probes, its user, its
HEALTHCHECK and one Schedule call from outside the container.

The build is keyed by the content it is made from, so an unchanged tree reuses the image; the first run
on a machine (or after a change to client/, server/ or the Containerfile) builds it, in about a minute.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from podfit.client import Client
from podfit.client.conformance import free_port

from tests.control_plane import http_status, wait_for

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "deploy" / "image" / "build.sh"
PODMAN_ENV = {**os.environ, "CONTAINERS_CONF": os.environ.get("CONTAINERS_CONF", str(BUILD.parent / "containers.conf"))}


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["podman", *args], env=PODMAN_ENV, check=check, capture_output=True, text=True)


@pytest.fixture(scope="module")
def image(tmp_path_factory: pytest.TempPathFactory) -> str:
    log = tmp_path_factory.mktemp("image") / "build.log"
    with log.open("w") as stderr:
        done = subprocess.run([str(BUILD)], stdout=subprocess.PIPE, stderr=stderr, text=True)
    assert done.returncode == 0, log.read_text()[-4000:]
    return done.stdout.strip().splitlines()[-1]


class Container:
    def __init__(self, image: str, *args: str) -> None:
        self.grpc_port, self.probe_port = free_port(), free_port()
        started = podman(
            "run",
            "--detach",
            "--rm",
            "--network=host",  # loopback only: podfit-server listens on 127.0.0.1 without TLS or tokens
            "--env",
            f"PODFIT_PROBE_ADDR=127.0.0.1:{self.probe_port}",
            image,
            "--grpc-addr",
            f"127.0.0.1:{self.grpc_port}",
            "--extender-addr",
            "off",
            "--metrics-addr",
            "off",
            *args,
        )
        self.id = started.stdout.strip()

    def probe(self, path: str) -> int:
        return http_status(f"http://127.0.0.1:{self.probe_port}{path}")

    def logs(self) -> str:
        done = podman("logs", self.id, check=False)
        return done.stdout + done.stderr

    def stop(self) -> None:
        podman("stop", "--time", "5", self.id, check=False)


@pytest.fixture
def container(image: str) -> Iterator[Container]:
    running = Container(image)
    yield running
    running.stop()


def test_the_built_image_serves_probes_and_a_schedule_call_as_a_non_root_user(container: Container) -> None:
    try:
        wait_for("/healthz from the container", lambda: container.probe("/healthz") == 200, 60, interval=0.2)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{container.logs()}") from None
    assert container.probe("/readyz") == 200

    with Client(f"127.0.0.1:{container.grpc_port}") as client:
        client.apply(
            [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                    "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}},
                }
                for name, cpu in (("small", "1"), ("large", "8"))
            ]
        )
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "nginx", "resources": {"requests": {"cpu": "2"}}}]},
        }
        answer = client.schedule(pod)
    assert answer.selected_node == "large"
    assert answer.feasible_count == 1

    inspected = json.loads(podman("inspect", container.id).stdout)[0]
    assert inspected["Config"]["User"] == "65532:65532"
    assert inspected["Config"]["Healthcheck"]["Test"][0] == "CMD"
    # The image's HEALTHCHECK, run inside the container, reaches the probe listener wherever it was moved.
    health = podman("healthcheck", "run", container.id, check=False)
    assert health.returncode == 0, health.stdout + health.stderr + container.logs()


def test_the_image_runs_the_podfit_cli_for_the_feeder_container(image: str) -> None:
    done = podman("run", "--rm", "--network=none", "--entrypoint", "podfit", image, "feed", "--help")
    assert "--kubeconfig" in done.stdout
