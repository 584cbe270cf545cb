"""Who may own a replicated group: the election, one strategy behind a small interface.

A replica campaigns (``acquire``, one attempt every ``retry_seconds``) until it holds the lease, then the
owner renews it (``renew``) for as long as it owns, and hands it back when it stops gracefully
(``release``). Two strategies, judged the same way, as client-go's leader election judges a Lease:

- ``KubernetesLease``: a ``coordination.k8s.io/v1`` Lease in the cluster's API server, as kube-scheduler
  elects its leader (holderIdentity, leaseDurationSeconds, acquireTime, renewTime, leaseTransitions;
  every write a create or an update carrying the resourceVersion read, so two candidates never both win:
  409 Conflict). Reached with the pod's service-account token and CA, or a kubeconfig file.
- ``EngineLease``: a key of the engine's JetStream KV bucket, compare-and-swap on its revision (the
  default outside a cluster: nothing but the engine is needed).

**Lapsed** is judged on the candidate's own clock: a lease whose version (resourceVersion, KV revision)
has not changed for the holder's lease duration since this candidate first saw that version; no clock is
compared across machines and no expiry timer of a server is relied on. A released lease (no holder) is
free at once. The owner renews every third of the lease and steps down when it could not for two thirds
(client-go's renew deadline, shorter than the lease).

The election only says who *may* own: ownership itself is fenced by the log (the new owner's ``owner``
entry, appended with the log's expected last sequence — ``transport.replicated``), never by these clocks.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import math
import os
import ssl
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

import aiohttp
import yaml
from nats.js.errors import KeyNotFoundError, KeyWrongLastSequenceError

if TYPE_CHECKING:
    from podfit.server.transport.replicated import Engine

ENGINE_LEASE_KEY = "owner"
LEASE_BUCKET = "podfit_lease"
SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
LEASES = "/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases"


class LeaseLost(Exception):
    """Another candidate holds the lease: a renewal refused by optimistic concurrency."""


class Election(Protocol):
    """One candidate's side of the election (``KubernetesLease``, ``EngineLease``)."""

    identity: str
    # How often a candidate looks at the lease.
    retry_seconds: float

    async def acquire(self) -> bool:
        """One attempt: takes the lease if it is free, released or lapsed; True while this candidate holds it."""
        ...

    async def renew(self) -> None:
        """Renews the lease this candidate holds; LeaseLost if another holds it now (any other error: no
        answer, try again within the renew deadline)."""
        ...

    async def release(self) -> None:
        """Hands the lease back (graceful stop): the next candidate need not wait for it to lapse."""
        ...

    def describe(self) -> str: ...

    async def close(self) -> None: ...


class Observed:
    """When this candidate first saw the lease's current version, on its own clock (client-go's
    observedTime)."""

    def __init__(self) -> None:
        self.version: str | None = None
        self.at = 0.0

    def lapsed(self, version: str, duration: float) -> bool:
        now = time.monotonic()
        if version != self.version:
            self.version, self.at = version, now
        return now - self.at > duration


# -- the engine's KV ----------------------------------------------------------------------------------------


class EngineLease:
    """The lease as a key of the engine's KV bucket (the value: the holder's peer address; empty when
    released), taken and renewed by compare-and-swap on the key's revision."""

    def __init__(self, engine: Engine, identity: str, value: bytes, lease_seconds: float) -> None:
        self.engine, self.identity, self.value = engine, identity, value
        self.lease_seconds = lease_seconds
        self.retry_seconds = min(0.1, lease_seconds / 20)
        self._revision = 0
        self._observed = Observed()

    @property
    def _kv(self) -> Any:
        assert self.engine.lease is not None, "the engine is not connected"
        return self.engine.lease

    def describe(self) -> str:
        return f"engine KV key {LEASE_BUCKET}/{ENGINE_LEASE_KEY}"

    async def acquire(self) -> bool:
        kv = self._kv
        try:
            entry = await kv.get(ENGINE_LEASE_KEY)
            revision, held_by = int(entry.revision or 0), bytes(entry.value or b"")
        except KeyNotFoundError:  # never taken
            revision, held_by = 0, b""
        lapsed = self._observed.lapsed(str(revision), self.lease_seconds)
        try:
            if revision == 0:
                self._revision = await kv.create(ENGINE_LEASE_KEY, self.value)
            elif not held_by or lapsed:
                self._revision = await kv.update(ENGINE_LEASE_KEY, self.value, last=revision)
            else:
                return False
        except KeyWrongLastSequenceError:  # another candidate took it meanwhile
            return False
        return True

    async def renew(self) -> None:
        try:
            self._revision = await self._kv.update(ENGINE_LEASE_KEY, self.value, last=self._revision)
        except KeyWrongLastSequenceError as exc:
            raise LeaseLost("another replica holds the lease") from exc

    async def release(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._kv.update(ENGINE_LEASE_KEY, b"", last=self._revision), 2.0)

    async def close(self) -> None:
        return None


# -- a coordination.k8s.io/v1 Lease -----------------------------------------------------------------------------


class LeaseSpec(TypedDict, total=False):
    """``coordination.k8s.io/v1`` LeaseSpec, as the API server sends it (the fields podfit uses)."""

    holderIdentity: str
    leaseDurationSeconds: int
    acquireTime: str
    renewTime: str
    leaseTransitions: int


class LeaseObject(TypedDict, total=False):
    apiVersion: str
    kind: str
    metadata: dict[str, Any]
    spec: LeaseSpec


def micro_time(moment: datetime | None = None) -> str:
    """A ``metav1.MicroTime``: RFC 3339 in UTC with microseconds."""
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class KubeAccess:
    """How to reach the API server: its URL, the CA that signs it, and a bearer token (read again before
    every request from ``token_file``: a projected service-account token is rotated while the pod runs)."""

    server: str
    ca_file: str = ""
    ca_data: bytes = b""
    token: str = ""
    token_file: str = ""
    insecure: bool = False

    @staticmethod
    def in_cluster_available(environ: Mapping[str, str] | None = None) -> bool:
        """Running in a pod with a service account: KUBERNETES_SERVICE_HOST set and its token mounted."""
        environ = os.environ if environ is None else environ
        return bool(environ.get("KUBERNETES_SERVICE_HOST")) and (SERVICE_ACCOUNT / "token").is_file()

    @classmethod
    def in_cluster(cls, environ: Mapping[str, str] | None = None) -> KubeAccess:
        environ = os.environ if environ is None else environ
        host, port = environ["KUBERNETES_SERVICE_HOST"], environ.get("KUBERNETES_SERVICE_PORT", "443")
        if ":" in host:
            host = f"[{host}]"
        return cls(
            f"https://{host}:{port}", ca_file=str(SERVICE_ACCOUNT / "ca.crt"), token_file=str(SERVICE_ACCOUNT / "token")
        )

    @classmethod
    def from_kubeconfig(cls, path: str) -> KubeAccess:
        """The current context's cluster and user of a kubeconfig file: a token or token file, and a CA
        (file or data). Client certificates and exec plugins are not read here."""
        try:
            config = yaml.safe_load(Path(path).read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ValueError(f"replication.kubeconfig: cannot read {path}: {exc}") from None
        base = Path(path).parent

        def named(section: str, name: str) -> dict[str, Any]:
            for item in config.get(section) or []:
                if item.get("name") == name:
                    return dict(item.get(section.rstrip("s")) or {})
            raise ValueError(f"replication.kubeconfig {path}: no {section.rstrip('s')} named {name!r}")

        context = named("contexts", str(config.get("current-context", "")))
        cluster, user = named("clusters", context.get("cluster", "")), named("users", context.get("user", ""))
        if not (user.get("token") or user.get("tokenFile")):
            raise ValueError(f"replication.kubeconfig {path}: the user needs a token or tokenFile")

        def resolved(value: str) -> str:
            return str(base / value) if value and not os.path.isabs(value) else value

        return cls(
            str(cluster["server"]).rstrip("/"),
            ca_file=resolved(cluster.get("certificate-authority", "")),
            ca_data=base64.b64decode(cluster.get("certificate-authority-data", "")),
            token=str(user.get("token", "")),
            token_file=resolved(user.get("tokenFile", "")),
            insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        )

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https:"):
            return False
        if self.insecure:
            context = ssl.create_default_context()
            context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            return context
        if self.ca_data:
            return ssl.create_default_context(cadata=self.ca_data.decode())
        return ssl.create_default_context(cafile=self.ca_file or None)

    def bearer(self) -> str:
        return Path(self.token_file).read_text().strip() if self.token_file else self.token


class KubeApiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status


class KubernetesLease:
    """A ``coordination.k8s.io/v1`` Lease, read and written as client-go's ``LeaseLock`` does: created if
    missing; taken when free, released, or unchanged for its leaseDurationSeconds on this candidate's own
    clock (leaseTransitions + 1, acquireTime now); renewed by its holder (renewTime now); released on a
    graceful stop (no holder, leaseDurationSeconds 1). Every update carries the resourceVersion last read,
    so a lost race is a 409 Conflict, never two holders."""

    def __init__(self, access: KubeAccess, namespace: str, name: str, identity: str, lease_seconds: float) -> None:
        self.access, self.namespace, self.name, self.identity = access, namespace, name, identity
        self.lease_seconds = lease_seconds
        # The Lease holds whole seconds: never less than this owner's own lease.
        self.duration = max(1, math.ceil(lease_seconds))
        # A candidate looks ten times a lease (kube-scheduler: every 2 s of a 15 s lease).
        self.retry_seconds = lease_seconds / 10
        self.timeout = max(1.0, lease_seconds / 3)
        self._held: LeaseObject | None = None
        self._observed = Observed()
        self._session: aiohttp.ClientSession | None = None

    def describe(self) -> str:
        return f"Lease {self.namespace}/{self.name}"

    @property
    def _path(self) -> str:
        return LEASES.format(namespace=self.namespace) + f"/{self.name}"

    async def _request(self, method: str, path: str, body: LeaseObject | None = None) -> LeaseObject | None:
        """The Lease the API server answered with; None for 404; KubeApiError for any other refusal."""
        if self._session is None:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.access.ssl_context()),
                timeout=aiohttp.ClientTimeout(total=self.timeout),
            )
        headers = {
            "Authorization": f"Bearer {self.access.bearer()}",
            "Accept": "application/json",
            "Content-Type": "application/json",
        }
        async with self._session.request(
            method, self.access.server + path, headers=headers, data=None if body is None else json.dumps(body)
        ) as response:
            text = await response.text()
            if response.status == 404:
                return None
            if response.status >= 300:
                try:
                    message = str(json.loads(text).get("message", text))
                except ValueError:
                    message = text[:200]
                raise KubeApiError(response.status, message)
            answer: LeaseObject = json.loads(text)
            return answer

    def _record(self, previous: LeaseSpec | None, taking: bool) -> LeaseSpec:
        now = micro_time()
        spec: LeaseSpec = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": self.duration,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": 0,
        }
        if previous is not None:
            spec["leaseTransitions"] = int(previous.get("leaseTransitions", 0)) + (1 if taking else 0)
            if not taking and "acquireTime" in previous:
                spec["acquireTime"] = previous["acquireTime"]
        return spec

    async def _update(self, lease: LeaseObject, spec: LeaseSpec) -> LeaseObject | None:
        """PUT with the resourceVersion read: None when another write came first (409 Conflict)."""
        body: LeaseObject = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": lease.get("metadata", {}),
            "spec": spec,
        }
        try:
            return await self._request("PUT", self._path, body)
        except KubeApiError as exc:
            if exc.status == 409:
                return None
            raise

    async def acquire(self) -> bool:
        lease = await self._request("GET", self._path)
        if lease is None:
            body: LeaseObject = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": self._record(None, taking=True),
            }
            try:
                self._held = await self._request("POST", LEASES.format(namespace=self.namespace), body)
            except KubeApiError as exc:
                if exc.status == 409:  # another candidate created it first
                    return False
                raise
            return self._held is not None
        spec = lease.get("spec", {})
        holder = spec.get("holderIdentity", "")
        duration = float(spec.get("leaseDurationSeconds") or self.duration)
        lapsed = self._observed.lapsed(str(lease.get("metadata", {}).get("resourceVersion", "")), duration)
        if holder and holder != self.identity and not lapsed:
            return False
        self._held = await self._update(lease, self._record(spec, taking=holder != self.identity))
        return self._held is not None

    async def renew(self) -> None:
        lease = self._held
        if lease is None:
            raise LeaseLost("this replica does not hold the Lease")
        renewed = await self._update(lease, self._record(lease.get("spec", {}), taking=False))
        if renewed is None:
            # Written by someone else since: still this replica's (an edit of its labels, say) or lost.
            current = await self._request("GET", self._path)
            if current is None or current.get("spec", {}).get("holderIdentity") != self.identity:
                self._held = None
                raise LeaseLost(f"another replica holds the {self.describe()}")
            renewed = await self._update(current, self._record(current.get("spec", {}), taking=False))
            if renewed is None:
                raise LeaseLost(f"the {self.describe()} keeps changing under its holder")
        self._held = renewed

    async def release(self) -> None:
        lease, self._held = self._held, None
        if lease is None:
            return
        spec = lease.get("spec", {})
        now = micro_time()
        released: LeaseSpec = {
            "holderIdentity": "",
            "leaseDurationSeconds": 1,
            "acquireTime": now,
            "renewTime": now,
            "leaseTransitions": int(spec.get("leaseTransitions", 0)),
        }
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self._update(lease, released), self.timeout)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


__all__ = [
    "Election",
    "EngineLease",
    "KubeAccess",
    "KubernetesLease",
    "LeaseLost",
]
