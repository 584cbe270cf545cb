"""Request builders and channel setup shared by the async and the sync client."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import grpc
from podfit.client.manifests import load_manifests, to_cluster_object, to_pod_reference
from podfit.k8s.convert import KIND_TO_ENUM, canonical_kind
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import scheduler_pb2 as sc
from podfit.v1 import simulation_pb2 as sim

DEFAULT_TARGET = "localhost:50051"
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class ChannelConfig:
    target: str = DEFAULT_TARGET
    # Bearer token sent as "authorization: Bearer <token>".
    token: str | None = None
    # TLS: set root_certificates (PEM) to trust a private CA; client cert+key for mTLS.
    tls: bool = False
    root_certificates: bytes | None = None
    client_certificate: bytes | None = None
    client_key: bytes | None = None
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # A connection of its own instead of one shared by every channel to the target: a server with
    # decision workers (podfit-server --workers) spreads connections over its processes, not calls.
    own_connection: bool = False

    @classmethod
    def from_files(
        cls,
        target: str = DEFAULT_TARGET,
        *,
        token: str | None = None,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        tls: bool = False,
    ) -> ChannelConfig:
        def read(path: str | None) -> bytes | None:
            return Path(path).read_bytes() if path else None

        return cls(
            target=target,
            token=token,
            tls=tls or bool(ca_file or cert_file),
            root_certificates=read(ca_file),
            client_certificate=read(cert_file),
            client_key=read(key_file),
        )

    def options(self) -> list[tuple[str, Any]]:
        options: list[tuple[str, Any]] = [
            ("grpc.max_receive_message_length", self.max_message_bytes),
            ("grpc.max_send_message_length", self.max_message_bytes),
        ]
        if self.own_connection:
            options.append(("grpc.use_local_subchannel_pool", 1))
        return options

    def credentials(self) -> grpc.ChannelCredentials | None:
        if not self.tls:
            return None
        return grpc.ssl_channel_credentials(self.root_certificates, self.client_key, self.client_certificate)

    def metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {self.token}"),) if self.token else ()


def kind_enum(kind: str) -> cc.ObjectKind.ValueType:
    return cc.ObjectKind.ValueType(KIND_TO_ENUM[canonical_kind(kind)])


def object_key(kind: str, name: str, namespace: str = "", resource_version: str = "") -> cc.ObjectKey:
    return cc.ObjectKey(kind=kind_enum(kind), namespace=namespace, name=name, resource_version=resource_version)


def upserts(objects: Any) -> list[cc.Update]:
    items = objects if isinstance(objects, list | tuple) else load_manifests(objects)
    return [cc.Update(upsert=to_cluster_object(item)) for item in items]


def apply_request(objects: Any = (), deletes: Iterable[cc.ObjectKey] = ()) -> cc.ApplyRequest:
    updates = upserts(objects) if objects else []
    updates.extend(cc.Update(delete=key) for key in deletes)
    return cc.ApplyRequest(updates=updates)


def replace_request(kind: str, objects: Any) -> cc.ReplaceRequest:
    items = objects if isinstance(objects, list | tuple) else load_manifests(objects)
    return cc.ReplaceRequest(kind=kind_enum(kind), objects=[to_cluster_object(o, canonical_kind(kind)) for o in items])


def list_request(
    kind: str,
    namespace: str = "",
    label_selector: str = "",
    pod_filter: str = "",
    limit: int = 0,
    field_selector: str = "",
) -> cc.ListRequest:
    filters = {
        "": cc.POD_PHASE_FILTER_UNSPECIFIED,
        "pending": cc.POD_PHASE_FILTER_PENDING,
        "bound": cc.POD_PHASE_FILTER_BOUND,
    }
    return cc.ListRequest(
        kind=kind_enum(kind),
        namespace=namespace,
        label_selector=label_selector,
        pod_filter=filters[pod_filter],
        limit=limit,
        field_selector=field_selector,
    )


def merge_page(merged: cc.ListResponse, page: cc.ListResponse) -> None:
    """Adds a List page to the answer gathered so far (generation and epoch: the latest page's)."""
    merged.objects.extend(page.objects)
    merged.node_allocations.extend(page.node_allocations)
    merged.generation = page.generation
    merged.server_epoch = page.server_epoch


def mark_synced_request(feeder: str = "") -> cc.MarkSyncedRequest:
    return cc.MarkSyncedRequest(feeder=feeder)


VIEWS = {"full": sc.VIEW_FULL, "basic": sc.VIEW_BASIC}
# kube-scheduler's names of the framework status codes, as its conformance answers and messages spell them.
STATUS_CODE_NAMES = {
    sc.STATUS_CODE_SUCCESS: "Success",
    sc.STATUS_CODE_UNSCHEDULABLE: "Unschedulable",
    sc.STATUS_CODE_UNSCHEDULABLE_AND_UNRESOLVABLE: "UnschedulableAndUnresolvable",
    sc.STATUS_CODE_ERROR: "Error",
}


def view_enum(view: str) -> sc.View.ValueType:
    try:
        return VIEWS[view]
    except KeyError:
        raise ValueError(f"view must be one of {', '.join(VIEWS)}, not {view!r}") from None


def filter_request(
    pod: Any,
    node_names: Sequence[str] = (),
    scheduler_name: str = "",
    view: str = "full",
    kube_scheduler_version: str = "",
) -> sc.FilterRequest:
    return sc.FilterRequest(
        pod=to_pod_reference(pod),
        node_names=list(node_names),
        scheduler_name=scheduler_name,
        view=view_enum(view),
        kube_scheduler_version=kube_scheduler_version,
    )


def score_request(
    pod: Any,
    node_names: Sequence[str] = (),
    scheduler_name: str = "",
    view: str = "full",
    kube_scheduler_version: str = "",
) -> sc.ScoreRequest:
    return sc.ScoreRequest(
        pod=to_pod_reference(pod),
        node_names=list(node_names),
        scheduler_name=scheduler_name,
        view=view_enum(view),
        kube_scheduler_version=kube_scheduler_version,
    )


def schedule_request(
    pod: Any,
    node_names: Sequence[str] = (),
    scheduler_name: str = "",
    assume: bool = False,
    disable_preemption: bool = False,
    view: str = "full",
    kube_scheduler_version: str = "",
) -> sc.ScheduleRequest:
    return sc.ScheduleRequest(
        pod=to_pod_reference(pod),
        node_names=list(node_names),
        scheduler_name=scheduler_name,
        assume=assume,
        disable_preemption=disable_preemption,
        view=view_enum(view),
        kube_scheduler_version=kube_scheduler_version,
    )


def schedule_batch_request(
    pods: Iterable[Any],
    node_names: Sequence[str] = (),
    scheduler_name: str = "",
    all_or_nothing: bool = False,
    disable_preemption: bool = False,
    view: str = "full",
    kube_scheduler_version: str = "",
    dry_run: bool = False,
) -> sc.ScheduleBatchRequest:
    """``pods``: each a manifest (dict, YAML/JSON text, kubernetes object) or "namespace/name" of a cached pod."""
    return sc.ScheduleBatchRequest(
        pods=[to_pod_reference(pod) for pod in pods],
        node_names=list(node_names),
        scheduler_name=scheduler_name,
        all_or_nothing=all_or_nothing,
        disable_preemption=disable_preemption,
        view=view_enum(view),
        kube_scheduler_version=kube_scheduler_version,
        dry_run=dry_run,
    )


def preempt_request(
    pod: Any, node_names: Sequence[str] = (), scheduler_name: str = "", kube_scheduler_version: str = ""
) -> sc.PreemptRequest:
    return sc.PreemptRequest(
        pod=to_pod_reference(pod),
        node_names=list(node_names),
        scheduler_name=scheduler_name,
        kube_scheduler_version=kube_scheduler_version,
    )


NodeGroupSpec = tuple[str, Any, int, int] | tuple[str, Any, int, int, Iterable[Any]]


def estimate_request(
    groups: Iterable[Iterable[Any]], node_groups: Iterable[NodeGroupSpec], scheduler_name: str = ""
) -> sim.EstimateScaleUpRequest:
    """``groups``: lists of identical pending pods (manifests or "namespace/name"); ``node_groups``:
    (id, template Node manifest, current size, max size[, the ResourceSlice manifests of one such node])."""
    request = sim.EstimateScaleUpRequest(
        groups=[sim.PodGroup(pods=[to_pod_reference(pod) for pod in group]) for group in groups],
        scheduler_name=scheduler_name,
    )
    for group_id, template, current, top, *rest in node_groups:
        slices = [to_cluster_object(item, "ResourceSlice") for item in (rest[0] if rest else ())]
        request.node_groups.add(
            id=group_id,
            template=to_cluster_object(template, "Node"),
            current_size=current,
            max_size=top,
            template_resource_slices=slices,
        )
    return request


def simulate_request(
    pods: Iterable[Any], scenario: sim.Scenario | None = None, scheduler_name: str = ""
) -> sim.SimulateRequest:
    """``pods``: placed in order after ``scenario`` (a podfit.v1 Scenario; None changes nothing)."""
    return sim.SimulateRequest(
        scenario=scenario or sim.Scenario(), pods=[to_pod_reference(pod) for pod in pods], scheduler_name=scheduler_name
    )


# SimulateDrainRequest.destinations by the name the clients and the CLI use.
DRAIN_DESTINATIONS = {
    "other-nodes": sim.DRAIN_DESTINATIONS_OTHER_NODES,
    "all-but-removed": sim.DRAIN_DESTINATIONS_ALL_BUT_REMOVED,
}


def drain_request(
    node_names: Sequence[str],
    *,
    skip_nodes_with_system_pods: bool = True,
    skip_nodes_with_local_storage: bool = True,
    skip_nodes_with_custom_controller_pods: bool = True,
    min_replica_count: int = 0,
    expendable_pods_priority_cutoff: int = -10,
    skip_terminal_pods: bool = True,
    now: datetime | None = None,
    scheduler_name: str = "",
    destinations: str = "other-nodes",
) -> sim.SimulateDrainRequest:
    """cluster-autoscaler's flags with its defaults; ``skip_terminal_pods=False`` hands Succeeded and Failed
    pods to the drain rules too; ``now`` (aware datetime) judges terminating pods; ``destinations``: which
    nodes may receive pods, ``"other-nodes"`` (podfit's rule: none of ``node_names``) or
    ``"all-but-removed"`` (cluster-autoscaler's: all but the node simulated and those found removable)."""
    if destinations not in DRAIN_DESTINATIONS:
        raise ValueError(f"destinations: {destinations!r} is not one of {', '.join(DRAIN_DESTINATIONS)}")
    request = sim.SimulateDrainRequest(
        node_names=list(node_names),
        options=sim.DrainOptions(
            skip_nodes_with_system_pods=skip_nodes_with_system_pods,
            skip_nodes_with_local_storage=skip_nodes_with_local_storage,
            skip_nodes_with_custom_controller_pods=skip_nodes_with_custom_controller_pods,
            min_replica_count=min_replica_count,
            expendable_pods_priority_cutoff=expendable_pods_priority_cutoff,
            skip_terminal_pods=skip_terminal_pods,
        ),
        scheduler_name=scheduler_name,
        destinations=DRAIN_DESTINATIONS[destinations],
    )
    if now is not None:
        if now.tzinfo is None:
            raise ValueError("now must carry a time zone (e.g. datetime.now(UTC))")
        request.now.FromDatetime(now)
    return request
