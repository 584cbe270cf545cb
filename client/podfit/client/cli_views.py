"""What ``podfit get`` and ``podfit describe`` print: kubectl's columns and sections, computed from the
manifests the cache returns and, for nodes, the NodeAllocation the server reads from its NodeInfo (so the
requested figures are the scheduler's own, never re-derived here)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from fractions import Fraction
from typing import Any

from podfit.k8s.quantity import QuantityError, parse_quantity
from podfit.v1 import cluster_cache_pb2 as cc

# Kinds without a namespace; every other kind podfit holds is namespaced.
CLUSTER_SCOPED = frozenset(
    {
        "Node",
        "Namespace",
        "StorageClass",
        "PersistentVolume",
        "CSINode",
        "CSIDriver",
        "VolumeAttachment",
        "DeviceClass",
        "ResourceSlice",
    }
)
# The node lifecycle controller's taints for a node whose Ready condition is False or Unknown; the cache
# keeps no node conditions (the scheduler reads these taints instead), so STATUS is derived from them.
NOT_READY_TAINTS = frozenset({"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"})
_NONE = "<none>"


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("   ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells)


def resource_name(kind: str) -> str:
    """kubectl's plural resource name: Pod -> pods, PodDisruptionBudget -> poddisruptionbudgets."""
    return f"{kind.lower()}s"


def age(timestamp: str | None, now: datetime | None = None) -> str:
    """kubectl's short age: 45s, 12m, 5h, 3d; <unknown> without a creationTimestamp."""
    if not timestamp:
        return "<unknown>"
    try:
        created = datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    seconds = max(0, int(((now or datetime.now(UTC)) - created).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= 2 * size or (unit == "m" and seconds >= size):
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def _amount(value: Any) -> Fraction:
    try:
        return parse_quantity(value if value not in (None, "") else "0")
    except QuantityError:
        return Fraction(0)


def cpu(value: Any) -> str:
    cores = _amount(value)
    return str(int(cores)) if cores.denominator == 1 else f"{int(cores * 1000)}m"


def memory(value: Any) -> str:
    size = _amount(value)
    for suffix, unit in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if size >= unit:
            shown = f"{float(size / unit):.1f}".removesuffix(".0")
            return f"{shown}{suffix}"
    return str(int(size))


def _plain(value: Any) -> str:
    return str(int(_amount(value)))


def _percent(used: Fraction, total: Fraction) -> str:
    return f"{int(100 * used / total)}%" if total else "-"


def node_status(manifest: Mapping[str, Any]) -> str:
    spec = manifest.get("spec") or {}
    taints = spec.get("taints") or []
    status = "NotReady" if any(t.get("key") in NOT_READY_TAINTS for t in taints) else "Ready"
    return f"{status},SchedulingDisabled" if spec.get("unschedulable") else status


def _taint(t: Mapping[str, Any]) -> str:
    value = f"={t['value']}" if t.get("value") else ""
    return f"{t.get('key', '')}{value}:{t.get('effect', '')}"


def _usage(manifest: Mapping[str, Any], allocation: cc.NodeAllocation | None) -> dict[str, tuple[str, str]]:
    """(requested, allocatable) for cpu, memory and pods, formatted."""
    allocatable = (manifest.get("status") or {}).get("allocatable") or {}
    requested = dict(allocation.requested) if allocation is not None else {}
    pods = allocation.pod_count if allocation is not None else 0
    return {
        "cpu": (cpu(requested.get("cpu")), cpu(allocatable.get("cpu"))),
        "memory": (memory(requested.get("memory")), memory(allocatable.get("memory"))),
        "pods": (str(pods), str(int(_amount(allocatable.get("pods"))))),
    }


def node_rows(
    manifests: Sequence[Mapping[str, Any]], allocations: Mapping[str, cc.NodeAllocation], wide: bool
) -> tuple[list[str], list[list[Any]]]:
    headers = ["NAME", "STATUS", "TAINTS", "CPU(REQ/ALLOC)", "MEMORY(REQ/ALLOC)", "PODS(REQ/ALLOC)", "AGE"]
    if wide:
        headers += ["ZONE", "INSTANCE-TYPE", "TAINT-LIST"]
    rows = []
    for m in manifests:
        meta = m.get("metadata") or {}
        taints = (m.get("spec") or {}).get("taints") or []
        usage = _usage(m, allocations.get(meta.get("name", "")))
        row: list[Any] = [
            meta.get("name", ""),
            node_status(m),
            len(taints),
            *("/".join(usage[r]) for r in ("cpu", "memory", "pods")),
            age(meta.get("creationTimestamp")),
        ]
        if wide:
            labels = meta.get("labels") or {}
            row += [
                labels.get("topology.kubernetes.io/zone", _NONE),
                labels.get("node.kubernetes.io/instance-type", _NONE),
                ",".join(_taint(t) for t in taints) or _NONE,
            ]
        rows.append(row)
    return headers, rows


def pod_rows(
    manifests: Sequence[Mapping[str, Any]], all_namespaces: bool, wide: bool
) -> tuple[list[str], list[list[Any]]]:
    headers = ["NAME", "PHASE", "NODE", "PRIORITY", "AGE"]
    if all_namespaces:
        headers.insert(0, "NAMESPACE")
    if wide:
        headers += ["NOMINATED-NODE", "SCHEDULER", "GATES"]
    rows = []
    for m in manifests:
        meta, spec, status = m.get("metadata") or {}, m.get("spec") or {}, m.get("status") or {}
        row: list[Any] = [
            meta.get("name", ""),
            status.get("phase") or "Pending",
            spec.get("nodeName") or _NONE,
            spec.get("priority", 0),
            age(meta.get("creationTimestamp")),
        ]
        if all_namespaces:
            row.insert(0, meta.get("namespace") or "default")
        if wide:
            gates = [g.get("name", "") for g in spec.get("schedulingGates") or []]
            row += [
                status.get("nominatedNodeName") or _NONE,
                spec.get("schedulerName") or "default-scheduler",
                ",".join(gates) or _NONE,
            ]
        rows.append(row)
    return headers, rows


def other_rows(
    kind: str, manifests: Sequence[Mapping[str, Any]], all_namespaces: bool
) -> tuple[list[str], list[list[Any]]]:
    namespaced = kind not in CLUSTER_SCOPED and all_namespaces
    columns = _KIND_COLUMNS.get(kind, ())
    headers = [*(["NAMESPACE"] if namespaced else []), "NAME", *(title for title, _ in columns), "AGE"]
    rows = []
    for m in manifests:
        meta = m.get("metadata") or {}
        prefix = [meta.get("namespace") or "default"] if namespaced else []
        cells = [cell(m) for _, cell in columns]
        rows.append([*prefix, meta.get("name", ""), *cells, age(meta.get("creationTimestamp"))])
    return headers, rows


def _spec_value(key: str) -> Callable[[Mapping[str, Any]], str]:
    def cell(m: Mapping[str, Any]) -> str:
        value = (m.get("spec") or {}).get(key)
        return "N/A" if value is None else str(value)

    return cell


def resource_claim_state(manifest: Mapping[str, Any]) -> str:
    """kubectl's STATE of a ResourceClaim: deleted, pending, allocated, reserved (comma-joined)."""
    deleting = bool((manifest.get("metadata") or {}).get("deletionTimestamp"))
    status = manifest.get("status") or {}
    states = ["deleted"] if deleting else []
    if not status.get("allocation"):
        states += [] if deleting else ["pending"]
    else:
        states += ["allocated", "reserved"] if status.get("reservedFor") else ["allocated"]
    return ",".join(states)


# kubectl's extra columns per kind (its printers in pkg/printers/internalversion), where a user looks for them.
_KIND_COLUMNS: dict[str, tuple[tuple[str, Callable[[Mapping[str, Any]], str]], ...]] = {
    "PodDisruptionBudget": (
        ("MIN AVAILABLE", _spec_value("minAvailable")),
        ("MAX UNAVAILABLE", _spec_value("maxUnavailable")),
        ("ALLOWED DISRUPTIONS", lambda m: str((m.get("status") or {}).get("disruptionsAllowed", 0))),
    ),
    "ResourceClaim": (("STATE", resource_claim_state),),
    "ResourceSlice": (
        ("NODE", lambda m: str((m.get("spec") or {}).get("nodeName") or "")),
        ("DRIVER", _spec_value("driver")),
        ("POOL", lambda m: str(((m.get("spec") or {}).get("pool") or {}).get("name", ""))),
    ),
}


def _section(title: str, items: Sequence[str], width: int = 22) -> list[str]:
    """kubectl's "Title:  first\\n        second" layout."""
    label = f"{title}:".ljust(width)
    if not items:
        return [f"{label}{_NONE}"]
    return [f"{label}{items[0]}", *(" " * width + item for item in items[1:])]


def _pairs(mapping: Mapping[str, Any] | None) -> list[str]:
    return [f"{k}={v}" for k, v in sorted((mapping or {}).items())]


def describe_node(
    manifest: Mapping[str, Any], allocation: cc.NodeAllocation | None, pods: Sequence[Mapping[str, Any]]
) -> str:
    meta, spec = manifest.get("metadata") or {}, manifest.get("spec") or {}
    allocatable = (manifest.get("status") or {}).get("allocatable") or {}
    lines = [
        *_section("Name", [meta.get("name", "")]),
        *_section("Labels", _pairs(meta.get("labels"))),
        *_section("Annotations", _pairs(meta.get("annotations"))),
        *_section("CreationTimestamp", [meta.get("creationTimestamp") or "<unknown>"]),
        *_section("Taints", [_taint(t) for t in spec.get("taints") or []]),
        *_section("Unschedulable", [str(bool(spec.get("unschedulable"))).lower()]),
        *_section("Status", [node_status(manifest)]),
        "Allocatable:",
        *(f"  {name}:".ljust(22) + str(value) for name, value in sorted(allocatable.items())),
    ]
    requested = dict(allocation.requested) if allocation is not None else {}
    rows = []
    for name in sorted({"cpu", "memory", "pods", *requested}):
        total = _amount(allocatable.get(name))
        if name == "pods":
            used = Fraction(allocation.pod_count if allocation is not None else 0)
            used_text, total_text = str(int(used)), str(int(total))
        else:
            used = _amount(requested.get(name))
            fmt = cpu if name == "cpu" else memory if name == "memory" or "storage" in name else _plain
            used_text, total_text = fmt(requested.get(name)), fmt(allocatable.get(name))
        rows.append([name, f"{used_text} ({_percent(used, total)})", total_text])
    allocated = table(["Resource", "Requests", "Allocatable"], rows)
    lines += ["Allocated resources:", *("  " + line for line in allocated.splitlines())]
    running = [p for p in pods if ((p.get("status") or {}).get("phase") or "Pending") not in ("Succeeded", "Failed")]
    lines.append(f"Non-terminated Pods:  ({len(running)} in total)")
    if running:
        pod_table = table(
            ["Namespace", "Name", "Phase", "Priority"],
            [
                [
                    (p.get("metadata") or {}).get("namespace") or "default",
                    (p.get("metadata") or {}).get("name", ""),
                    (p.get("status") or {}).get("phase") or "Pending",
                    (p.get("spec") or {}).get("priority", 0),
                ]
                for p in running
            ],
        )
        lines += ["  " + line for line in pod_table.splitlines()]
    return "\n".join(lines)


def _toleration(t: Mapping[str, Any]) -> str:
    key = t.get("key", "")
    operator = t.get("operator") or ("Equal" if key else "Exists")
    text = f"{key}={t.get('value', '')}" if operator == "Equal" else f"{key or '<all>'} op=Exists"
    text += f":{t['effect']}" if t.get("effect") else ""
    if t.get("tolerationSeconds") is not None:
        text += f" for {t['tolerationSeconds']}s"
    return text


def _containers(title: str, containers: Sequence[Mapping[str, Any]]) -> list[str]:
    if not containers:
        return []
    lines = [f"{title}:"]
    for c in containers:
        resources = c.get("resources") or {}
        lines.append(f"  {c.get('name', '')}:")
        if c.get("restartPolicy") == "Always":
            lines.append("    Sidecar:    true")
        for part in ("requests", "limits"):
            values = resources.get(part) or {}
            lines += _section(f"    {part.capitalize()}", [f"{k}: {v}" for k, v in sorted(values.items())], 16)
    return lines


def describe_pod(manifest: Mapping[str, Any]) -> str:
    meta, spec, status = manifest.get("metadata") or {}, manifest.get("spec") or {}, manifest.get("status") or {}
    lines = [
        *_section("Name", [meta.get("name", "")]),
        *_section("Namespace", [meta.get("namespace") or "default"]),
        *_section("Priority", [str(spec.get("priority", 0))]),
        *_section("Priority Class Name", [spec.get("priorityClassName") or _NONE]),
        *_section("Scheduler", [spec.get("schedulerName") or "default-scheduler"]),
        *_section("Node", [spec.get("nodeName") or _NONE]),
        *_section("Nominated Node", [status.get("nominatedNodeName") or _NONE]),
        *_section("Phase", [status.get("phase") or "Pending"]),
        *_section("CreationTimestamp", [meta.get("creationTimestamp") or "<unknown>"]),
        *_section("Labels", _pairs(meta.get("labels"))),
        *_section("Scheduling Gates", [g.get("name", "") for g in spec.get("schedulingGates") or []]),
        *_containers("Init Containers", spec.get("initContainers") or []),
        *_containers("Containers", spec.get("containers") or []),
        *_section("Overhead", [f"{k}: {v}" for k, v in sorted((spec.get("overhead") or {}).items())]),
        *_section("Node-Selectors", _pairs(spec.get("nodeSelector"))),
        *_section("Tolerations", [_toleration(t) for t in spec.get("tolerations") or []]),
    ]
    return "\n".join(lines)
