"""Replicas elected through a real ``coordination.k8s.io/v1`` Lease (podfit.server.transport.election): upstream
etcd and kube-apiserver (tests/control_plane.py), three nats-server nodes and three podfit-server replicas on
loopback, each process started and stopped (or SIGKILLed, SIGSTOPped) by its own PID.

The replicas reach the apiserver as deploy/replicated/podfit-replicas.yaml runs them: the ServiceAccount
podfit-replica with the shipped Role and RoleBinding (a bound token in a kubeconfig instead of a mounted one).
One group serves the module, the tests running in order: one holder; the owner SIGKILLed under writes; a
feeder against another replica through an owner change; a deposed owner that can never append."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from podfit.client import AsyncClient
from podfit.client.errors import PodfitError

from tests.builders import make_node
from tests.control_plane import (
    ADMIN_TOKEN,
    ControlPlane,
    TcpProxy,
    apply_manifests,
    create_node,
    ensure_namespace,
    service_account_token,
    stop_started,
)
from tests.engine_cluster import EngineCluster, write_as_it_resumes
from tests.engine_cluster import PodfitReplica as Replica

ROOT = Path(__file__).resolve().parent.parent
LEASE_SECONDS = 2.0
# Beyond the lease: a candidate looks every tenth of a lease (0.2 s), the new owner catches up and fences
# the log (one append), and the client's retry lands (its backoff, 0.1 s); the apiserver round trips are
# a few milliseconds on loopback.
FAILOVER_BOUND_SECONDS = 2.0
NAMESPACE = "podfit"
LEASE = "podfit-replicas"


def rbac() -> list[dict[str, Any]]:
    """The replicas' ServiceAccount, Role and RoleBinding, as deploy/replicated ships them."""
    path = ROOT / "deploy" / "replicated" / "podfit-replicas.yaml"
    kinds = {"ServiceAccount", "Role", "RoleBinding"}
    return [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] in kinds]


def kubeconfig(folder: Path, name: str, server: str, ca: Path, token: str) -> Path:
    path = folder / f"{name}.kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": name, "context": {"cluster": "e2e", "user": name}}],
        "current-context": name,
    }
    path.write_text(yaml.safe_dump(config))
    return path


@dataclass
class Group:
    control_plane: ControlPlane
    engine: EngineCluster
    replicas: list[Replica]
    folder: Path
    # Each replica reaches the apiserver through its own relay.
    proxies: list[TcpProxy]
    transitions: list[int] = field(default_factory=list)

    def owner(self) -> Replica:
        owners = [r for r in self.replicas if r.owner()]
        assert len(owners) == 1, f"owners: {[r.name for r in owners]}\n{self.tails()}"
        return owners[0]

    def lease(self) -> dict[str, Any]:
        from kubernetes import client

        api = self.control_plane.api()
        got = client.CoordinationV1Api(api).read_namespaced_lease(LEASE, NAMESPACE)
        return dict(client.ApiClient().sanitize_for_serialization(got)["spec"])

    def holder(self) -> Replica | None:
        """The replica the Lease names (its identity: peer address / PID / a random part)."""
        identity = self.lease().get("holderIdentity", "")
        for replica in self.replicas:
            if replica.popen is not None and identity.startswith(f"127.0.0.1:{replica.peer_port}/{replica.popen.pid}/"):
                return replica
        return None

    def tails(self) -> str:
        return "\n".join(f"--- {r.name}\n" + "\n".join(r.log().splitlines()[-25:]) for r in self.replicas)


def wait_for(what: str, check: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


@pytest.fixture(scope="module")
def group(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Group]:
    folder = tmp_path_factory.mktemp("replicated-kube")
    try:
        control_plane = ControlPlane(folder / "control-plane").start()
        api = control_plane.api()
        ensure_namespace(api, NAMESPACE)
        apply_manifests(api, rbac())
        token = service_account_token(api, NAMESPACE, "podfit-replica")
        engine = EngineCluster(folder / "engine", 3).start()
        key = folder / "key"
        key.write_bytes(os.urandom(32).hex().encode())
        key.chmod(0o600)
        proxies = [TcpProxy(control_plane.port) for _ in range(3)]
        replicas = []
        for i, proxy in enumerate(proxies):
            config = kubeconfig(folder, f"podfit-{i}", f"https://127.0.0.1:{proxy.port}", control_plane.pki.ca, token)
            flags = ("--replication-kubeconfig", str(config), "--replication-lease-namespace", NAMESPACE)
            replicas.append(Replica(f"podfit-{i}", folder, engine.urls, key, lease_seconds=LEASE_SECONDS, flags=flags))
        started = Group(control_plane, engine, replicas, folder, proxies)
        try:
            for replica in replicas:
                replica.start()
            try:
                wait_for("every replica ready", lambda: all(r.ready() == 200 for r in replicas) or dead(replicas), 60)
                assert not dead(replicas)
                wait_for("an owner", lambda: any(r.owner() for r in replicas), 30)
            except AssertionError:
                raise AssertionError(started.tails()) from None
            yield started
        finally:
            for proxy in proxies:
                proxy.flowing.set()
            for replica in replicas:
                replica.stop()
            engine.stop()
            for proxy in proxies:
                proxy.cut()
    finally:
        stop_started()


def dead(replicas: list[Replica]) -> bool:
    return not all(r.alive() for r in replicas)


async def has_node(replica: Replica, name: str) -> bool:
    to = AsyncClient(replica.address)
    try:
        await to.get("Node", name)
        return True
    except PodfitError:
        return False
    finally:
        await to.close()


async def eventually(what: str, check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await asyncio.sleep(0.05)


def test_exactly_one_replica_holds_the_lease_and_owns(group: Group) -> None:
    owner = group.owner()
    spec = group.lease()
    assert group.holder() is owner, f"{spec}\n{group.tails()}"
    assert spec["leaseDurationSeconds"] == int(LEASE_SECONDS)
    assert spec["acquireTime"] and spec["renewTime"]
    renewed = spec["renewTime"]
    # The owner renews it (every third of the lease); nobody else takes it.
    wait_for("a renewal", lambda: group.lease()["renewTime"] != renewed, 2 * LEASE_SECONDS)
    assert group.holder() is owner
    assert "Lease podfit/podfit-replicas" in owner.log()
    group.transitions.append(int(spec.get("leaseTransitions") or 0))


@dataclass
class Writer:
    """Namespaces applied one after another through the replicas (the next alive one while one is down,
    retrying UNAVAILABLE while the owner changes); every acknowledged name kept."""

    group: Group
    start: int
    acknowledged: list[str] = field(default_factory=list)
    attempts: list[tuple[float, float]] = field(default_factory=list)
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    def alive(self) -> Replica:
        replicas = self.group.replicas
        for offset in range(len(replicas)):
            replica = replicas[(self.start + offset) % len(replicas)]
            if replica.alive():
                return replica
        raise AssertionError("no replica alive")

    async def run(self, prefix: str) -> None:
        i = 0
        while not self.stop.is_set():
            name = f"{prefix}-{i}"
            deadline = time.monotonic() + LEASE_SECONDS + FAILOVER_BOUND_SECONDS + 20
            while True:
                to = AsyncClient(self.alive().address)
                try:
                    sent = time.monotonic()
                    await to.apply([{"kind": "Namespace", "metadata": {"name": name}}], timeout=5)
                    self.attempts.append((sent, time.monotonic()))
                    self.acknowledged.append(name)
                    break
                except PodfitError as exc:
                    retry = exc.code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
                    if not retry or time.monotonic() > deadline:
                        raise
                    await asyncio.sleep(0.1)
                finally:
                    await to.close()
            i += 1
            await asyncio.sleep(0.02)


async def namespaces(replica: Replica) -> set[str]:
    to = AsyncClient(replica.address)
    try:
        await to.stats()  # catches up with everything acknowledged
        return {n.namespace.metadata.name for n in (await to.list("Namespace")).objects}
    finally:
        await to.close()


async def kill_the_owner_under_writes(group: Group, prefix: str) -> tuple[Replica, Replica, float, Writer]:
    """SIGKILLs the owner while a writer goes on through another replica; (killed, new owner, seconds from
    the kill to the first write sent after it and acknowledged, the writer)."""
    owner = group.owner()
    others = [i for i, r in enumerate(group.replicas) if r is not owner]
    writer = Writer(group, others[0])
    work = asyncio.ensure_future(writer.run(prefix))
    await asyncio.sleep(0.5)
    assert writer.acknowledged, "nothing acknowledged before the kill"
    killed_at = time.monotonic()
    owner.kill()
    deadline = killed_at + LEASE_SECONDS + FAILOVER_BOUND_SECONDS + 10
    while not any(sent > killed_at for sent, _ in writer.attempts) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.3)  # a few writes more, with the new owner
    writer.stop.set()
    await work
    after = sorted(answered for sent, answered in writer.attempts if sent > killed_at)
    assert after, f"nothing acknowledged after the owner was killed\n{group.tails()}"
    new_owner = group.owner()
    assert new_owner is not owner
    return owner, new_owner, after[0] - killed_at, writer


async def test_the_owner_killed_is_replaced_through_the_lease_within_a_bound_and_nothing_acknowledged_is_lost(
    group: Group,
) -> None:
    before = group.lease()
    killed, new_owner, failover, writer = await kill_the_owner_under_writes(group, "kill")
    print(f"failover with a Lease: first write acknowledged {failover:.2f} s after SIGKILL (lease {LEASE_SECONDS} s)")
    assert failover < LEASE_SECONDS + FAILOVER_BOUND_SECONDS, group.tails()
    spec = group.lease()
    assert group.holder() is new_owner, f"{spec}\n{group.tails()}"
    assert int(spec["leaseTransitions"]) == int(before.get("leaseTransitions") or 0) + 1
    for replica in group.replicas:
        if replica.alive():
            missing = set(writer.acknowledged) - await namespaces(replica)
            assert not missing, f"{replica.name} lost acknowledged writes: {sorted(missing)}"
    # The killed replica comes back as a follower (from the snapshot and the log): three again.
    killed.start()
    wait_for("the restarted replica ready", lambda: killed.ready() == 200, 30)
    assert group.owner() is new_owner


async def test_a_feeder_against_another_replica_survives_an_owner_change(group: Group) -> None:
    owner = group.owner()
    target = next(r for r in group.replicas if r is not owner and r.alive())
    api = group.control_plane.api()
    kubeconfig = group.control_plane.kubeconfig("feeder", ADMIN_TOKEN)
    log_path = group.folder / "feeder.log"
    with log_path.open("ab") as log:
        feeder = subprocess.Popen(
            [
                *(sys.executable, "-m", "podfit.client.cli", "--target", target.address, "feed"),
                *("--kubeconfig", str(kubeconfig), "--kinds", "nodes,namespaces", "--log-interval", "0"),
            ],
            stdout=log,
            stderr=log,
        )
    try:
        create_node(api, make_node("fed-before").capacity(cpu="4", memory="8Gi").json())
        alive = [r for r in group.replicas if r.alive()]
        for replica in alive:
            await eventually(f"fed-before on {replica.name}", lambda r=replica: has_node(r, "fed-before"), 20)
        killed, new_owner, failover, _ = await kill_the_owner_under_writes(group, "feed")
        print(f"failover with a feeder running: {failover:.2f} s")
        assert target.alive() and feeder.poll() is None, log_path.read_text()[-3000:]
        create_node(api, make_node("fed-after").capacity(cpu="4", memory="8Gi").json())
        for replica in (r for r in group.replicas if r.alive()):
            await eventually(f"fed-after on {replica.name}", lambda r=replica: has_node(r, "fed-after"), 20)
            assert await has_node(replica, "fed-before")
        assert killed is owner and new_owner is not owner
        killed.start()  # three again, for the next test
        wait_for("the restarted replica ready", lambda: killed.ready() == 200, 30)
    finally:
        if feeder.poll() is None:
            feeder.terminate()
            try:
                feeder.wait(10)
            except subprocess.TimeoutExpired:
                feeder.kill()
                feeder.wait()


async def test_a_deposed_owner_resumed_after_the_lease_moved_can_never_append(group: Group) -> None:
    """The owner is paused (SIGSTOP) past its lease while another takes the Lease and fences the log; it
    resumes with its link to the apiserver silent, so it cannot learn from the Lease that it lost it before
    the write it is sent reaches the log: the log alone refuses it."""
    old = group.owner()
    assert old.popen is not None
    old.popen.send_signal(signal.SIGSTOP)  # cut off from everything: its Lease lapses on the others' clocks
    group.proxies[group.replicas.index(old)].flowing.clear()
    try:
        wait_for(
            "another replica holding the Lease and owning",
            lambda: (holder := group.holder()) is not None and holder is not old and holder.owner(),
            2 * LEASE_SECONDS + 10,
        )
    finally:
        # A write the deposed owner receives as it comes back: made in its cache, refused by the log.
        outcome = await write_as_it_resumes(old)
    assert outcome in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), f"{outcome}\n{group.tails()}"
    assert old.popen.wait(15) == 3, group.tails()  # it stops, to start again as a replica
    # Fenced by the log (its append refused), not told by the Lease.
    assert "the log refused an append" in old.log(), group.tails()
    group.proxies[group.replicas.index(old)].flowing.set()
    new_owner = group.owner()
    assert group.holder() is new_owner
    assert "stray" not in await namespaces(new_owner)


def test_an_owner_stopped_gracefully_releases_the_lease_and_is_replaced_without_waiting_it_out(group: Group) -> None:
    owner = group.owner()
    assert owner.popen is not None
    before = int(group.lease().get("leaseTransitions") or 0)
    stopped_at = time.monotonic()
    owner.popen.send_signal(signal.SIGTERM)
    new_owner = wait_for(
        "another owner",
        lambda: next((r for r in group.replicas if r is not owner and r.owner()), None),
        2 * LEASE_SECONDS + 5,
    )
    took = time.monotonic() - stopped_at
    print(f"owner stopped with SIGTERM: another owns {took:.2f} s later (lease {LEASE_SECONDS} s)")
    assert owner.popen.wait(15) == 0, group.tails()
    assert "released the Lease podfit/podfit-replicas" in owner.log()
    assert group.holder() is new_owner
    assert int(group.lease()["leaseTransitions"]) == before + 1
    # Unreleased, a lease renewed every third of it is taken two thirds of a lease after the stop at the
    # earliest: sooner shows the release was seen.
    assert took < LEASE_SECONDS * 2 / 3, group.tails()


# -- choosing the election (no processes) -------------------------------------------------------------------


@pytest.fixture
def pod_service_account(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A service account mounted as in a pod (token, CA, namespace), where podfit looks for it."""
    folder = tmp_path / "serviceaccount"
    folder.mkdir()
    (folder / "token").write_text("pod-token\n")
    (folder / "ca.crt").write_text("")
    (folder / "namespace").write_text("podfit-ns\n")
    from podfit.server import replica_app
    from podfit.server.transport import election

    monkeypatch.setattr(election, "SERVICE_ACCOUNT", folder)
    monkeypatch.setattr(replica_app, "SERVICE_ACCOUNT", folder)
    return folder


IN_CLUSTER = {"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}


@pytest.mark.parametrize(
    "argv, environ, chosen",
    [
        pytest.param([], {}, None, id="outside a cluster the engine's KV lease is the default"),
        pytest.param(
            [], IN_CLUSTER, ("https://10.96.0.1:443", "podfit-ns", LEASE), id="in a pod a Lease in its namespace"
        ),
        pytest.param(["--replication-election", "engine"], IN_CLUSTER, None, id="in a pod the engine when asked"),
        pytest.param(
            ["--replication-kubeconfig", "KUBECONFIG", "--replication-lease-name", "mine"],
            {},
            ("https://127.0.0.1:6443", "default", "mine"),
            id="a kubeconfig outside a cluster chooses a Lease in default",
        ),
        pytest.param(
            ["--replication-lease-namespace", "other"],
            IN_CLUSTER,
            ("https://10.96.0.1:443", "other", LEASE),
            id="the Lease's namespace as set",
        ),
    ],
)
def test_the_election_is_a_lease_in_a_cluster_and_the_engines_elsewhere(
    pod_service_account: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    environ: dict[str, str],
    chosen: tuple[str, str, str] | None,
) -> None:
    from podfit.server.replica_app import kubernetes_lease
    from podfit.server.settings import resolve

    config = kubeconfig(tmp_path, "x", "https://127.0.0.1:6443", tmp_path / "ca.crt", "t")
    argv = [str(config) if a == "KUBECONFIG" else a for a in argv]
    if not environ:
        (pod_service_account / "token").unlink()  # not in a pod
    for name in IN_CLUSTER:
        monkeypatch.delenv(name, raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    lease = kubernetes_lease(resolve(argv, {}))
    assert (lease and (lease.access.server, lease.namespace, lease.name)) == chosen
    if lease is not None and not argv:
        assert lease.access.bearer() == "pod-token"  # read from the mounted file, at each request


@pytest.mark.parametrize(
    "argv, environ, refused",
    [
        pytest.param([], {"PODFIT_REPLICATION_ELECTION": "raft"}, "must be kubernetes or engine", id="an unknown one"),
        pytest.param(
            ["--replication-election", "engine", "--replication-kubeconfig", "k"],
            {},
            "only for replication.election kubernetes",
            id="a kubeconfig for the engine's lease",
        ),
    ],
)
def test_election_settings_are_refused_at_start_when_they_contradict(
    argv: list[str], environ: dict[str, str], refused: str
) -> None:
    from podfit.server.settings import SettingsError, resolve

    with pytest.raises(SettingsError, match=refused):
        resolve(argv, environ)


def test_a_lease_asked_for_outside_a_cluster_without_a_kubeconfig_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from podfit.server.replica_app import kubernetes_lease
    from podfit.server.settings import SettingsError, resolve

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(SettingsError, match=r"needs replication\.kubeconfig"):
        kubernetes_lease(resolve(["--replication-election", "kubernetes"], {}))
