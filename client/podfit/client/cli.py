"""``podfit``: the command-line client, with kubectl's habits. Readable tables by default, ``-o json|yaml``
for the protobuf JSON mapping of the response with 64-bit counters as numbers (``-o wide|name`` where
kubectl has them; a command refuses an output it cannot honour rather than ignoring it). Errors are one
line on stderr and a non-zero exit, never a traceback."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import difflib
import json
import os
import re
import sys
import time
from collections.abc import Callable, Collection, Sequence
from datetime import datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import Message
from podfit.client import _requests as rq
from podfit.client import cli_views, whatif
from podfit.client._requests import DEFAULT_TARGET, ChannelConfig
from podfit.client.errors import PodfitError
from podfit.client.hints import connection_hint
from podfit.client.manifests import Located, load_located, to_cluster_object
from podfit.client.sync import Client
from podfit.k8s.convert import (
    ENUM_TO_KIND,
    FIELD_TO_KIND,
    KINDS,
    ConversionError,
    canonical_kind,
    message_to_data,
    object_to_manifest,
)
from podfit.k8s.strict import check_strict
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import scheduler_pb2 as sc

_OUTCOMES = {
    cc.UPDATE_OUTCOME_APPLIED: "applied",
    cc.UPDATE_OUTCOME_STALE: "stale",
    cc.UPDATE_OUTCOME_UNCHANGED: "unchanged",
}


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    return "\n".join("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in cells)


# Rows a default table shows; the rest are summarised in one line. ``-o wide`` (and json/yaml) keep all,
# so a 5,000-node cluster gives a readable answer by default and the whole answer on request.
_TOP = 20
# Names a default table lists in one cell (ties, unscheduled pods) before summarising the rest.
_TOP_NAMES = 5


def _capped(rows: Sequence[Sequence[Any]], wide: bool, limit: int = _TOP) -> tuple[Sequence[Sequence[Any]], str]:
    """The rows a table shows and the line that says what it left out (empty when nothing was)."""
    if wide or len(rows) <= limit:
        return rows, ""
    return rows[:limit], f"... and {len(rows) - limit:,} more; -o wide for all"


def _names(names: Sequence[str], wide: bool) -> str:
    """A list of names for one cell or line, cut to a few unless ``-o wide``."""
    if wide or len(names) <= _TOP_NAMES:
        return ", ".join(names)
    return f"{', '.join(names[:_TOP_NAMES])} and {len(names) - _TOP_NAMES:,} more"


def _print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]], wide: bool) -> None:
    shown, rest = _capped(rows, wide)
    print(_table(headers, shown))
    if rest:
        print(rest)


def _data(message: Message) -> dict[str, Any]:
    """What ``-o json|yaml`` prints: every field, 64-bit counters (generations) as numbers, so that
    ``jq '.generation > 7'`` compares numbers, not text."""
    return message_to_data(message, all_fields=True)


def _json(message: Message) -> str:
    return json.dumps(_data(message), indent=2)


def _single_pod(path: str, namespace: str | None = None) -> Any:
    manifests = [m for _, m in _located([path], namespace) if m.get("kind", "Pod") == "Pod"]
    if len(manifests) != 1:
        raise ConversionError(path, f"expected exactly one Pod, found {len(manifests)}")
    return manifests[0]


def _pod_arg(args: argparse.Namespace) -> Any:
    """The pod a decision command is about: a cached pod named positionally (``podfit schedule web-1 -n
    prod``), or the one manifest of ``-f``; exactly one of the two."""
    files = args.filename if isinstance(args.filename, list) else [args.filename] if args.filename else []
    if bool(args.pod) == bool(files):
        raise ValueError(f"{args.command}: name a cached pod (POD [-n NAMESPACE]) or give -f FILE, not both")
    if args.pod:
        return args.pod if "/" in args.pod else f"{args.namespace or 'default'}/{args.pod}"
    # schedule takes several pods (a batch); the other commands exactly one.
    return _pods(files, args.namespace) if args.command == "schedule" else _single_pod(files[0], args.namespace)


def _nodes(args: argparse.Namespace) -> list[str]:
    return [n for n in (args.nodes or "").split(",") if n]


def _verdict_rows(nodes: Sequence[sc.NodeVerdict]) -> list[list[Any]]:
    """Nodes that fit first (stable), so a capped table shows them before the rejections."""
    return [
        [
            v.node_name,
            "yes" if v.fits else "no",
            v.plugin or "-",
            rq.STATUS_CODE_NAMES.get(v.code, "?"),
            "; ".join(v.reasons) or "-",
        ]
        for v in sorted(nodes, key=lambda v: not v.fits)
    ]


def _print_scores(scores: Sequence[sc.NodeScore], wide: bool) -> None:
    """Best first (stable, so equal totals keep the server's order), the top rows unless ``wide``."""
    plugins: list[str] = []
    for score in scores:
        for p in score.plugins:
            if p.plugin not in plugins:
                plugins.append(p.plugin)
    rows = [
        [s.node_name, s.total, *[next((p.score for p in s.plugins if p.plugin == name), "-") for name in plugins]]
        for s in sorted(scores, key=lambda s: -s.total)
    ]
    _print_table(["NODE", "TOTAL", *plugins], rows, wide)


def _preemption_text(p: sc.PreemptResponse, wide: bool) -> str:
    if not p.nominated_node:
        return f"preemption: no node ({p.message or 'not helpful'})"
    lines = [f"preemption: evict on node {p.nominated_node} ({p.num_pdb_violations} PDB violations)"]
    if p.node_ties and list(p.node_ties) != [p.nominated_node]:
        lines.append(f"equally good nodes: {_names(p.node_ties, wide)}")
    victims, rest = _capped([[v.namespace, v.name, v.priority] for v in p.victims], wide)
    lines.append(_table(["NAMESPACE", "NAME", "PRIORITY"], victims))
    if rest:
        lines.append(rest)
    return "\n".join(lines)


# -- commands ---------------------------------------------------------------------------------------


# Objects per Apply call: far below gRPC's message limit even for large pods, and a progress step.
_APPLY_CHUNK = 2000


def _located(paths: Sequence[str], namespace: str | None) -> list[Located]:
    """Every document of the files, with ``-n`` filled in where a namespaced object names none (and a
    conflicting one refused, as kubectl does)."""
    located: list[Located] = []
    with _progress(None, "read", unit="doc") as bar:
        documents = [doc for path in paths for doc in load_located(path, lambda: bar.update(1))]
    for where, manifest in documents:
        kind = str(manifest.get("kind") or "Pod")
        if kind in KINDS:
            try:
                check_strict(manifest, kind)
            except ConversionError as exc:
                raise ConversionError(where, str(exc)) from None
        # Only objects of namespaced kinds podfit holds (a bare pod manifest has no kind): not Scenario.
        if namespace and kind in KINDS and kind not in cli_views.CLUSTER_SCOPED:
            meta = dict(manifest.get("metadata") or {})
            if meta.get("namespace") and meta["namespace"] != namespace:
                raise ConversionError(
                    where, f"its namespace {meta['namespace']!r} does not match --namespace {namespace!r}"
                )
            manifest = {**manifest, "metadata": {**meta, "namespace": namespace}}
        located.append((where, manifest))
    return located


def _progress(total: int | None, what: str, unit: str = "obj") -> Any:
    """A progress bar on stderr when it is a terminal (``total`` None: a running count); a silent stand-in
    otherwise, so pipes and logs get plain output."""
    from tqdm import tqdm

    return tqdm(total=total, desc=what, unit=unit, file=sys.stderr, disable=not sys.stderr.isatty(), leave=False)


def _locate_error(exc: PodfitError, located: Sequence[Located], offset: int) -> PodfitError:
    """A server-side field path "updates[N]..." made to name the file and document of update N."""

    def where(path: str) -> str:
        match = re.match(r"updates\[(\d+)\]\.(?:upsert\.\w+\.)?(.*)", path)
        if not match or offset + int(match.group(1)) >= len(located):
            return path
        return f"{located[offset + int(match.group(1))][0]}: {match.group(2)}"

    message = exc.message
    violations = [(where(f), d) for f, d in exc.field_violations]
    for (old, _), (new, _) in zip(exc.field_violations, violations, strict=True):
        message = message.replace(old, new)
    return PodfitError(exc.code, message, violations, exc.reason)


def _plural(count: int, word: str) -> str:
    return f"{count} {word if count == 1 else word + 's'}"


def _file_of(where: str) -> str:
    """The file of a located document ("cluster.yaml: document 3" -> "cluster.yaml")."""
    return where.split(": document ", 1)[0]


def cmd_apply(client: Client, args: argparse.Namespace) -> int:
    located = _located(args.filename, args.namespace)
    # What-if files (deploy/examples/ holds them beside the cluster) are questions for other commands: a
    # Scenario or NodeGroup with the pods to place. Such a file is named and left out whole, its pods too.
    questions = {_file_of(where) for where, m in located if m.get("kind") in (whatif.SCENARIO, whatif.NODE_GROUP)}
    if questions:
        print(
            f"skipped {_plural(len(questions), 'what-if file')} ({', '.join(sorted(questions))}): ask them with "
            "`podfit simulate -f` (a Scenario) or `podfit estimate -f` (NodeGroups)",
            file=sys.stderr,
        )
        located = [(where, m) for where, m in located if _file_of(where) not in questions]
    objects = []
    for where, manifest in located:
        try:
            objects.append(to_cluster_object(manifest))
        except ConversionError as exc:
            raise ConversionError(where, str(exc)) from None
    if args.replace:
        by_kind: dict[str, list[Any]] = {kind: [] for kind in KINDS}
        for obj in objects:
            by_kind[FIELD_TO_KIND[str(obj.WhichOneof("object"))]].append(obj)
        responses = {kind: client.replace(kind, objs) for kind, objs in by_kind.items()}
        if args.output in ("json", "yaml"):
            body = {k: _data(r) for k, r in responses.items()}
            _print_data(body, args.output)
        elif args.output == "name":
            for obj in objects:
                print(_object_name(obj))
        else:
            if args.verbose:
                rows = [[k, r.upserted_count, r.deleted_count, r.unchanged_count] for k, r in responses.items()]
                print(_table(["KIND", "UPSERTED", "DELETED", "UNCHANGED"], rows))
            upserted = [_plural(r.upserted_count, k.lower()) for k, r in responses.items() if r.upserted_count]
            deleted = sum(r.deleted_count for r in responses.values())
            unchanged = sum(r.unchanged_count for r in responses.values())
            print(
                f"{', '.join(upserted) or '0 objects'} replaced, {deleted} deleted, {unchanged} unchanged "
                f"(generation {max(r.generation for r in responses.values())})"
            )
        return 0
    response = cc.ApplyResponse()
    with _progress(len(objects), "apply") as bar:
        for start in range(0, len(objects), _APPLY_CHUNK):
            chunk = objects[start : start + _APPLY_CHUNK]
            try:
                part = client.apply(chunk)
            except PodfitError as exc:
                raise _locate_error(exc, located, start) from None
            response.results.extend(part.results)
            response.generation = part.generation or response.generation
            response.server_epoch = part.server_epoch
            response.applied_count += part.applied_count
            response.stale_count += part.stale_count
            response.unchanged_count += part.unchanged_count
            bar.update(len(chunk))
    if _emit(response, args.output):
        return 0
    if args.output == "name":
        for result in response.results:
            print(f"{ENUM_TO_KIND[result.key.kind].lower()}/{result.key.name}")
        return 0
    applied: dict[str, int] = {}
    for result in response.results:
        kind = ENUM_TO_KIND[result.key.kind]
        if result.outcome == cc.UPDATE_OUTCOME_APPLIED:
            applied[kind] = applied.get(kind, 0) + 1
        if args.verbose:
            where = f"{result.key.namespace}/" if result.key.namespace else ""
            print(f"{kind.lower()}/{where}{result.key.name} {_OUTCOMES.get(result.outcome, '?')}")
    summary = ", ".join(_plural(n, kind.lower()) for kind, n in applied.items()) or "0 objects"
    print(
        f"{summary} applied, {response.unchanged_count} unchanged, {response.stale_count} stale "
        f"(generation {response.generation})"
    )
    return 0


def _object_name(obj: cc.ClusterObject) -> str:
    field = str(obj.WhichOneof("object"))
    return f"{FIELD_TO_KIND[field].lower()}/{getattr(obj, field).metadata.name}"


def _print_data(body: Any, output: str) -> None:
    if output == "json":
        print(json.dumps(body, indent=2))
    else:
        import yaml

        print(yaml.safe_dump(body, sort_keys=False), end="")


def cmd_delete(client: Client, args: argparse.Namespace) -> int:
    keys: list[tuple[str, str, str]] = []
    if args.filename:
        if args.kind:
            raise ValueError("delete: give either -f FILE or KIND NAME..., not both")
        for where, manifest in _located(args.filename, args.namespace):
            try:
                kind = canonical_kind(str(manifest.get("kind", "")))
            except ConversionError as exc:
                raise ConversionError(where, str(exc)) from None
            meta = manifest.get("metadata") or {}
            namespace = "" if kind in cli_views.CLUSTER_SCOPED else meta.get("namespace") or "default"
            keys.append((kind, namespace, str(meta.get("name", ""))))
    else:
        if not args.kind or not args.names:
            raise ValueError("delete: give -f FILE, or KIND and at least one NAME")
        kind = canonical_kind(args.kind)
        namespace = "" if kind in cli_views.CLUSTER_SCOPED else args.namespace or "default"
        keys = [(kind, namespace, name) for name in args.names]
    response = client.apply(deletes=[rq.object_key(kind, name, namespace) for kind, namespace, name in keys])
    if _emit(response, args.output):
        return 0
    missing = 0
    for (kind, _, name), result in zip(keys, response.results, strict=True):
        if result.outcome == cc.UPDATE_OUTCOME_APPLIED:
            print(f"{kind.lower()}/{name}" if args.output == "name" else f'{kind.lower()} "{name}" deleted')
        elif not args.ignore_not_found:
            # The cache answers UNCHANGED for a delete of an object it does not hold.
            missing += 1
            print(f'Error from server (NotFound): {cli_views.resource_name(kind)} "{name}" not found', file=sys.stderr)
    return 1 if missing else 0


class _NotFound(Exception):
    """A named object the cache does not hold: kubectl's one line and exit 1, not a gRPC status."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(f'Error from server (NotFound): {cli_views.resource_name(kind)} "{name}" not found')


def _get(client: Client, kind: str, name: str, namespace: str = "") -> cc.GetResponse:
    try:
        return client.get(kind, name, namespace)
    except PodfitError as exc:
        if exc.code.name == "NOT_FOUND":
            raise _NotFound(kind, name) from None
        raise


def cmd_get(client: Client, args: argparse.Namespace) -> int:
    kind = canonical_kind(args.kind)
    scoped = kind not in cli_views.CLUSTER_SCOPED
    namespace = (args.namespace or "default") if scoped and not args.all_namespaces else ""
    allocations: dict[str, cc.NodeAllocation] = {}
    if args.name:
        got = _get(client, kind, args.name, namespace)
        objects = [got.object]
        if got.HasField("node_allocation"):
            allocations[got.node_allocation.node_name] = got.node_allocation
    else:
        listed = client.list(kind, namespace, args.selector or "")
        objects = list(listed.objects)
        allocations = {a.node_name: a for a in listed.node_allocations}
    manifests = [object_to_manifest(o) for o in objects]
    manifests.sort(
        key=lambda m: ((m.get("metadata") or {}).get("namespace", ""), (m.get("metadata") or {}).get("name", ""))
    )
    if args.output in ("json", "yaml"):
        _print_data(
            manifests[0] if args.name else {"apiVersion": "v1", "kind": "List", "items": manifests}, args.output
        )
        return 0
    if args.output == "name":
        for m in manifests:
            print(f"{kind.lower()}/{(m.get('metadata') or {}).get('name', '')}")
        return 0
    if not manifests:
        where = f" in {namespace} namespace" if namespace else ""
        print(f"No resources found{where}.", file=sys.stderr)
        return 0
    wide = args.output == "wide"
    if kind == "Node":
        headers, rows = cli_views.node_rows(manifests, allocations, wide)
    elif kind == "Pod":
        headers, rows = cli_views.pod_rows(manifests, args.all_namespaces, wide)
    else:
        headers, rows = cli_views.other_rows(kind, manifests, args.all_namespaces)
    print(cli_views.table(headers, rows))
    return 0


def cmd_describe(client: Client, args: argparse.Namespace) -> int:
    kind = canonical_kind(args.kind)
    if kind not in ("Node", "Pod"):
        raise ValueError(f"describe: only nodes and pods can be described, not {cli_views.resource_name(kind)}")
    if kind == "Node":
        got = _get(client, kind, args.name)
        allocation = got.node_allocation if got.HasField("node_allocation") else None
        # The server selects the node's pods: a large cluster's every pod never crosses the wire.
        bound = client.list("Pod", field_selector=f"spec.nodeName={args.name}").objects
        on_node = [object_to_manifest(p) for p in bound]
        print(cli_views.describe_node(object_to_manifest(got.object), allocation, on_node))
    else:
        got = _get(client, kind, args.name, args.namespace or "default")
        print(cli_views.describe_pod(object_to_manifest(got.object)))
    return 0


def cmd_filter(client: Client, args: argparse.Namespace) -> int:
    response = client.filter(
        _pod_arg(args), _nodes(args), args.scheduler_name, kube_scheduler_version=args.kube_scheduler_version
    )
    if _emit(response, args.output):
        return 0
    if response.gated:
        print(f"gated: {response.message}")
        return 0
    if response.unschedulable_message:
        print(response.unschedulable_message)
    _print_table(["NODE", "FITS", "PLUGIN", "CODE", "REASONS"], _verdict_rows(response.nodes), args.output == "wide")
    print(f"{response.feasible_count}/{len(response.nodes)} nodes fit (generation {response.generation})")
    return 0


def cmd_score(client: Client, args: argparse.Namespace) -> int:
    response = client.score(
        _pod_arg(args), _nodes(args), args.scheduler_name, kube_scheduler_version=args.kube_scheduler_version
    )
    if _emit(response, args.output):
        pass
    elif response.gated:
        print(f"gated: {response.message}")
    elif not response.scores:
        print("no node fits")
    else:
        _print_scores(response.scores, args.output == "wide")
    return 0


def _pods(paths: Sequence[str], namespace: str | None = None) -> list[Any]:
    manifests = [m for _, m in _located(paths, namespace) if m.get("kind", "Pod") == "Pod"]
    if not manifests:
        raise ConversionError(", ".join(paths), "expected at least one Pod, found none")
    return manifests


def cmd_schedule(client: Client, args: argparse.Namespace) -> int:
    pod = _pod_arg(args)
    if isinstance(pod, list):
        if len(pod) > 1:
            return _schedule_batch(client, args, pod)
        pod = pod[0]
    response = client.schedule(
        pod,
        _nodes(args),
        args.scheduler_name,
        assume=args.assume,
        disable_preemption=args.no_preempt,
        kube_scheduler_version=args.kube_scheduler_version,
    )
    if _emit(response, args.output):
        return 0
    if response.gated:
        print(f"gated: {response.message}")
        return 0
    wide = args.output == "wide"
    if response.selected_node:
        ties = f" (tied: {_names(response.best_nodes, wide)})" if len(response.best_nodes) > 1 else ""
        print(f"selected node: {response.selected_node}{ties}")
        if args.assume:
            print(f"assumed at generation {response.assumed_generation}")
        _print_scores(response.scores, wide)
    else:
        print(response.unschedulable_message or "no node fits")
        _print_table(["NODE", "FITS", "PLUGIN", "CODE", "REASONS"], _verdict_rows(response.nodes), wide)
        if response.HasField("preemption"):
            print(_preemption_text(response.preemption, wide))
    return 0


def _schedule_batch(client: Client, args: argparse.Namespace, pods: list[Any]) -> int:
    """Several pods: one ScheduleBatch (each pod sees the ones before it placed), reserving them only with
    --assume, as for one pod; otherwise a dry run that leaves the cache as it was."""
    response = client.schedule_batch(
        pods,
        _nodes(args),
        args.scheduler_name,
        all_or_nothing=args.all_or_nothing,
        disable_preemption=args.no_preempt,
        view="basic",
        kube_scheduler_version=args.kube_scheduler_version,
        dry_run=not args.assume,
    )
    if _emit(response, args.output):
        return 0
    rows = []
    for manifest, answer in zip(pods, response.results, strict=True):
        meta = manifest.get("metadata") or {}
        if answer.gated:
            outcome = f"gated: {answer.message}"
        elif answer.selected_node:
            outcome = f"assumed at generation {answer.assumed_generation}" if answer.assumed_generation else "fits"
        elif answer.HasField("preemption") and answer.preemption.nominated_node:
            outcome = f"no node fits; preemption on {answer.preemption.nominated_node}"
        else:
            outcome = "no node fits"
        rows.append([meta.get("namespace") or "default", meta.get("name", ""), answer.selected_node or "-", outcome])
    _print_table(["NAMESPACE", "NAME", "NODE", "OUTCOME"], rows, args.output == "wide")
    if not args.assume:
        fits = sum(1 for answer in response.results if answer.selected_node)
        print(f"{fits}/{len(pods)} pods fit; nothing reserved (--assume to reserve them)")
    elif args.all_or_nothing and not response.all_placed:
        print(f"not every pod fits: nothing assumed (all-or-nothing; generation {response.generation})")
    else:
        print(f"placed {response.placed_count}/{len(pods)} pods (generation {response.assumed_generation})")
    return 0


def cmd_preempt(client: Client, args: argparse.Namespace) -> int:
    response = client.preempt(
        _pod_arg(args), _nodes(args), args.scheduler_name, kube_scheduler_version=args.kube_scheduler_version
    )
    if not _emit(response, args.output):
        print(_preemption_text(response, args.output == "wide"))
    return 0


def cmd_explain(client: Client, args: argparse.Namespace) -> int:
    from podfit.client import explain

    body = explain.explain(client, _pod_arg(args), _nodes(args), args.scheduler_name, args.kube_scheduler_version)
    if args.output == "json":
        print(json.dumps(body, indent=2))
    elif args.output == "yaml":
        import yaml

        print(yaml.safe_dump(body, sort_keys=False), end="")
    else:
        print(explain.render(body))
    return 0


def _emit(message: Message, output: str) -> bool:
    """Prints ``message`` as JSON or YAML when asked; False when a table is wanted instead."""
    if output == "json":
        print(_json(message))
    elif output == "yaml":
        import yaml

        print(yaml.safe_dump(_data(message), sort_keys=False), end="")
    else:
        return False
    return True


def _documents(paths: Sequence[str], namespace: str | None = None) -> list[Any]:
    return [m for _, m in _located(paths, namespace)]


def _percent(fraction: float) -> str:
    return f"{100 * fraction:.0f}%"


def cmd_simulate(client: Client, args: argparse.Namespace) -> int:
    request = whatif.simulate_request(_documents(args.filename, args.namespace), args.scheduler_name)
    response = client.simulate(list(request.pods), request.scenario, request.scheduler_name)
    if _emit(response, args.output):
        return 0
    rows = []
    for p in response.placements:
        if p.node_name:
            outcome = "placed"
        elif p.message:
            outcome = p.message
        else:
            outcome = f"no node fits ({sum(1 for v in p.rejections if not v.fits)} nodes rejected it)"
        rows.append([p.namespace, p.name, p.node_name or "-", outcome])
    wide = args.output == "wide"
    _print_table(["NAMESPACE", "NAME", "NODE", "OUTCOME"], rows, wide)
    if response.hypothetical_nodes:
        print()
        nodes = [
            [n.node_name, len(n.pods), _percent(n.cpu), _percent(n.memory), _percent(n.pods_fraction)]
            for n in response.hypothetical_nodes
        ]
        _print_table(["HYPOTHETICAL NODE", "PODS", "CPU", "MEMORY", "POD SLOTS"], nodes, wide)
    placed = sum(1 for p in response.placements if p.node_name)
    print(f"\nplaced {placed}/{len(response.placements)} pods (forked from generation {response.base_generation})")
    return 0


def cmd_estimate(client: Client, args: argparse.Namespace) -> int:
    request = whatif.estimate_request(_documents(args.filename, args.namespace), args.scheduler_name)
    groups = [list(group.pods) for group in request.groups]
    node_groups: list[rq.NodeGroupSpec] = [
        (g.id, g.template, g.current_size, g.max_size, list(g.template_resource_slices)) for g in request.node_groups
    ]
    response = client.estimate_scale_up(groups, node_groups, request.scheduler_name)
    if _emit(response, args.output):
        return 0
    wide = args.output == "wide"
    rows = [
        [e.node_group_id, e.node_count, len(e.scheduled), len(e.unscheduled), _names(e.unscheduled, wide) or "-"]
        for e in response.estimates
    ]
    _print_table(["NODE GROUP", "NEW NODES", "SCHEDULED", "UNSCHEDULED", "UNSCHEDULED PODS"], rows, wide)
    plural = "" if len(groups) == 1 else "s"
    print(f"\n{len(groups)} equivalence group{plural} (forked from generation {response.base_generation})")
    return 0


def cmd_drain(client: Client, args: argparse.Namespace) -> int:
    if not args.dry_run:
        raise ValueError("drain only simulates: add --dry-run (nothing is ever evicted)")
    now = None
    if args.now:
        try:
            now = datetime.fromisoformat(args.now)
        except ValueError:
            raise ValueError(f"--now: {args.now!r} is not an RFC 3339 time (e.g. 2024-06-25T12:00:00Z)") from None
        if now.tzinfo is None:
            raise ValueError(f"--now: {args.now!r} needs a time zone (e.g. Z or +02:00)")
    response = client.simulate_drain(
        args.node_names,
        skip_nodes_with_system_pods=args.skip_nodes_with_system_pods,
        skip_nodes_with_local_storage=args.skip_nodes_with_local_storage,
        skip_nodes_with_custom_controller_pods=args.skip_nodes_with_custom_controller_pods,
        min_replica_count=args.min_replica_count,
        expendable_pods_priority_cutoff=args.expendable_pods_priority_cutoff,
        skip_terminal_pods=args.skip_terminal_pods,
        now=now,
        destinations=args.destinations,
    )
    if _emit(response, args.output):
        return 0
    rows = []
    for n in response.nodes:
        if n.HasField("blocking_pod"):
            b = n.blocking_pod
            why = f"{b.namespace}/{b.name}: {b.reason} ({b.message})"
        elif n.unplaced_pod:
            why = f"{n.unplaced_pod}: no other node can take it"
        else:
            why = "-"
        rows.append([n.node_name, "yes" if n.removable else "no", n.unremovable_reason or "-", why])
    wide = args.output == "wide"
    _print_table(["NODE", "REMOVABLE", "REASON", "BLOCKING POD"], rows, wide)
    for n in response.nodes:
        if not n.removable:
            continue
        print(f"\n{n.node_name}: {len(n.pods_to_move)} pods to move, {len(n.daemonset_pods)} DaemonSet pods stay")
        if n.pods_to_move:
            moves = [[m.namespace, m.name, m.node_name or "- (terminal)"] for m in n.pods_to_move]
            _print_table(["NAMESPACE", "NAME", "DESTINATION"], moves, wide)
        if n.HasField("pdb") and not (n.pdb.can_remove and n.pdb.in_parallel):
            b = n.pdb.blocking_pod
            print(f"PDB: {'one at a time' if n.pdb.can_remove else 'blocks removal'} ({b.namespace}/{b.name})")
    print(f"\nforked from generation {response.base_generation}")
    return 0


def _flag(value: str) -> bool:
    """cluster-autoscaler's boolean flags: true/false (Go's strconv.ParseBool spellings)."""
    if value.lower() in ("true", "t", "1"):
        return True
    if value.lower() in ("false", "f", "0"):
        return False
    raise argparse.ArgumentTypeError(f"{value!r} is not true or false")


def _alive(pid_file: str | None) -> tuple[bool, int | None]:
    """(whether the process of the PID file still runs, its pid); (True, None) without a PID file."""
    if not pid_file:
        return True, None
    try:
        with open(pid_file) as handle:
            pid = int(handle.read().strip())
    except (OSError, ValueError):
        return False, None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False, pid
    except PermissionError:
        pass
    # A child that exited but was not reaped yet (a zombie) has ended too.
    try:
        with open(f"/proc/{pid}/stat") as stat:
            if stat.read().rsplit(")", 1)[-1].split()[0] == "Z":
                return False, pid
    except OSError:
        pass
    return True, pid


def _last_line(log: str | None) -> str:
    if not log:
        return ""
    try:
        with open(log, errors="replace") as handle:
            lines = [line.strip() for line in handle if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


# How long wait-ready waits for the server's log to say where it listens before trying the address the
# environment (or the default) gives.
LOG_SILENCE = 10.0


def _dialable(addr: str) -> str:
    """Where to reach a server listening on ``addr``: a wildcard host is this machine."""
    host, _, port = addr.rpartition(":")
    return f"127.0.0.1:{port}" if host.strip("[]") in ("", "0.0.0.0", "::") else addr


def _listening_on(log: str | None) -> str:
    """The gRPC address podfit-server's log says it listens on ("" until it has said so)."""
    if not log:
        return ""
    try:
        with open(log, errors="replace") as handle:
            for line in handle:
                if "podfit-server listening" in line:
                    try:
                        addr = json.loads(line).get("addr", "")
                    except ValueError:
                        addr = line.partition("grpc=")[2].split(" ", 1)[0]
                    if addr:
                        return _dialable(str(addr))
    except OSError:
        return ""
    return ""


def cmd_wait_ready(args: argparse.Namespace, config: ChannelConfig) -> int:
    """Polls the server's health until it serves; exits 1 at once, with the server's last log line, if
    its process has ended (a busy port, a bad setting), or after --timeout. Without --target it follows
    the server it waits for: where its log says it listens, else PODFIT_GRPC_ADDR (as podfit-server reads
    it), else the default address."""
    deadline = time.monotonic() + args.timeout
    followed = not args.target_given
    environment = os.environ.get("PODFIT_GRPC_ADDR", "")
    if followed and environment:
        config = dataclasses.replace(config, target=_dialable(environment))
    # Following a server whose log is given: wait for the log to say where it listens (flags win over
    # the environment there), rather than ask whatever else answers on another address meanwhile — for
    # LOG_SILENCE seconds, since a server logging warnings only never says it.
    known = not (followed and args.log)
    silent_until = time.monotonic() + LOG_SILENCE
    client = Client(config=config)
    try:
        while True:
            alive, pid = _alive(args.pid_file)
            if not alive:
                why = _last_line(args.log) or "no log line"
                which = f" (pid {pid})" if pid else ""
                print(f"podfit: podfit-server{which} did not start: {why}", file=sys.stderr)
                return 1
            said = _listening_on(args.log) if followed else ""
            if said and said != config.target:
                client.close()
                config = dataclasses.replace(config, target=said)
                client = Client(config=config)
            known = known or bool(said) or time.monotonic() > silent_until
            if known:
                try:
                    client.stats(timeout=1)
                except PodfitError:
                    pass
                else:
                    print(f"podfit-server is serving on {config.target}")
                    return 0
            if time.monotonic() > deadline:
                print(
                    f"podfit: podfit-server did not answer on {config.target} within {args.timeout:g} s",
                    file=sys.stderr,
                )
                return 1
            time.sleep(0.2)
    finally:
        client.close()


def cmd_stats(client: Client, args: argparse.Namespace) -> int:
    response = client.stats()
    if not _emit(response, args.output):
        fields = json_format.MessageToDict(response, always_print_fields_with_no_presence=True)
        rows = []
        for name, value in sorted(fields.items()):
            if isinstance(value, list):
                value = ", ".join(map(str, value))
            elif isinstance(value, dict):
                value = ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
            rows.append([name, value])
        print(_table(["FIELD", "VALUE"], rows))
    return 0


# What ``podfit conformance`` says of a cases file without a case (and fails).
NO_CASES = "no case to compare, nothing compared"


def cmd_conformance(args: argparse.Namespace, config: ChannelConfig) -> int:
    from podfit.client.conformance import run
    from podfit.client.conformance_compare import format_table

    options = {"config": config} if args.target_given else {}
    with contextlib.ExitStack() as stack:

        def progress(total: int) -> Callable[[], object]:
            bar = stack.enter_context(_progress(total, "cases", unit="case"))
            return lambda: bar.update(1)

        report = run(args.cases, args.target if args.target_given else None, progress, **options)
    if args.report_json:
        with open(args.report_json, "w") as out:
            json.dump(report.as_dict(), out, indent=2)
    if not report.total:
        # An empty file compares nothing: never a pass.
        print(f"{NO_CASES}: {args.cases}", file=sys.stderr)
    if args.output in ("json", "yaml"):
        _print_data(report.as_dict(), args.output)
        return 0 if report.ok else 1
    print(format_table(report))
    for failure in report.failures[: args.show]:
        print(f"\n--- {failure['id']}\n{failure['diff']}")
    print(f"\n{report.passed} passed, {report.failed} failed")
    return 0 if report.ok else 1


def _bench_soak(args: argparse.Namespace, config: ChannelConfig) -> int:
    """``podfit bench soak``: concurrent feeders and deciders, checked (podfit.client.soak)."""
    import asyncio

    from podfit.client import soak
    from podfit.client.conformance import LocalServer

    if args.target_given:
        report = asyncio.run(soak.run(args.target, args.duration, config=config))
    else:
        with LocalServer("--workers", str(args.workers), _what_if_flag(args)) as server:
            report = asyncio.run(soak.run(server.target, args.duration))
    print(report.summary())
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"soak": report.as_dict()}, out, indent=2)
    return 0 if report.ok else 1


def _bench_mixed(args: argparse.Namespace, config: ChannelConfig) -> int:
    """``podfit bench mixed``: deciders, the extender, a feeder and what-if at once (podfit.client.mixed)."""
    import asyncio

    from podfit.client import bench, mixed
    from podfit.client.conformance import LocalServer, free_port

    machine = bench.machine()
    sizes = {"duration": args.phase_seconds, "nodes": args.nodes, "pods": args.pods}
    if args.target_given:
        if not args.extender_url:
            print("podfit bench: error: mixed with --target needs --extender-url (its extender's URL)", file=sys.stderr)
            return 2
        processes = asyncio.run(bench.server_processes(args.target, config=config))
        where = f"the server at {args.target} ({_processes(processes)})"
        report = asyncio.run(mixed.run(args.target, args.extender_url, **sizes, config=config))
    else:
        port = free_port()
        with LocalServer(
            "--workers", str(args.workers), _what_if_flag(args), "--extender-addr", f"127.0.0.1:{port}"
        ) as server:
            processes = asyncio.run(bench.server_processes(server.target))
            where = f"a podfit-server started here ({_processes(processes)})"
            report = asyncio.run(mixed.run(server.target, f"http://127.0.0.1:{port}/scheduler", **sizes))
    measured_on = f"machine: {machine}; {where}; {args.nodes} nodes, {args.pods} bound pods"
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"machine": measured_on, "mixed": report.as_dict()}, out, indent=2)
    if args.output in ("json", "yaml"):
        _print_data({"machine": measured_on, "mixed": report.as_dict()}, args.output)
    else:
        print(measured_on)
        print(report.table())
    return 0 if report.ok else 1


def _what_if_flag(args: argparse.Namespace) -> str:
    return "--what-if-process" if args.what_if_process else "--no-what-if-process"


def _processes(shape: tuple[int, bool]) -> str:
    count, what_if = shape
    if count == 1:
        workers = "1 process"
    else:
        workers = f"{count} processes: the cache's owner and {count - 1} decision worker{'s' if count > 2 else ''}"
    return f"{workers}, beside the what-if process" if what_if else workers


def cmd_bench(args: argparse.Namespace, config: ChannelConfig) -> int:
    import asyncio

    from podfit.client import bench
    from podfit.client.conformance import LocalServer

    if args.workloads == ["soak"]:
        return _bench_soak(args, config)
    if args.workloads == ["mixed"]:
        return _bench_mixed(args, config)
    names = bench.expand(args.workloads)
    callers = f"{args.clients} concurrent clients" if args.clients > 1 else "1 client"
    machine = bench.machine()  # the load before the run
    with _progress(len(names), "bench", unit="workload") as bar:
        options: dict[str, Any] = {
            "batch": args.batch,
            "view": args.view,
            "progress": lambda: bar.update(1),
            "clients": args.clients,
        }
        if args.target_given:
            processes = asyncio.run(bench.server_processes(args.target, config=config))
            where = f"the server at {args.target} ({_processes(processes)})"
            results = asyncio.run(bench.run(names, args.target, args.decisions, args.stream, config=config, **options))
        else:
            with LocalServer("--workers", str(args.workers), _what_if_flag(args)) as server:
                processes = asyncio.run(bench.server_processes(server.target))
                where = f"a podfit-server started here ({_processes(processes)})"
                results = asyncio.run(
                    bench.run(
                        names, server.target, args.decisions, args.stream, server_pid=server.process.pid, **options
                    )
                )
    measured_on = f"machine: {machine}; decisions by {where}, asked by {callers}"
    body: dict[str, Any] = {"machine": measured_on, "workloads": {}}
    for result in results:
        key = result.name if result.mode == "grpc" else f"{result.name} [{result.mode}]"
        body["workloads"][key] = result.as_dict()
    if args.json:
        with open(args.json, "w") as out:
            json.dump(body, out, indent=2)
    if args.output in ("json", "yaml"):
        _print_data(body, args.output)
        return 0
    print(measured_on)
    print(bench.table(results))
    for result in results:
        if result.checked:
            print(f"{result.name}: every answer checked: {result.checked}")
    return 0


def cmd_feed(args: argparse.Namespace, config: ChannelConfig) -> int:
    """Long-running: lists and watches a Kubernetes API server and keeps podfit current (podfit.feed)."""
    from podfit.feed.command import run

    return run(args, config)


class _Parser(argparse.ArgumentParser):
    """argparse, plus kubectl's "did you mean" for a mistyped subcommand."""

    commands: Collection[str] = ()

    def error(self, message: str) -> Any:
        typo = re.match(r"argument command: invalid choice: '?([^' ]*)'?", message)
        if typo and self.commands:
            close = difflib.get_close_matches(typo.group(1), self.commands, n=1)
            message = f'unknown command "{typo.group(1)}" for "podfit"'
            message += f'; did you mean "{close[0]}"?' if close else f" (commands: {', '.join(self.commands)})"
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="podfit", description="Client for the podfit scheduling-decision service.")
    parser.add_argument("--version", action="version", version=f"podfit {_version()}")
    _global_flags(parser, defaults=True)
    parser.add_argument("-A", "--all-namespaces", action="store_true", help="get: every namespace")
    sub = parser.add_subparsers(dest="command", required=True)
    parser.commands = sub.choices  # filled in as the subcommands are added below

    p = sub.add_parser("apply", help="upsert objects from files, directories or stdin")
    p.add_argument("-f", "--filename", action="append", required=True, help="file, directory or - (repeatable)")
    p.add_argument("--replace", action="store_true", help="make these objects the whole cluster state")
    p.add_argument("-v", "--verbose", action="count", default=0, help="also print one line per object")
    p = sub.add_parser("delete", help="delete objects by kind and name, or those of manifests (-f)")
    p.add_argument("kind", nargs="?")
    p.add_argument("names", nargs="*", metavar="name")
    p.add_argument("-f", "--filename", action="append", help="delete the objects of these manifests (repeatable)")
    p.add_argument("--ignore-not-found", action="store_true", help="an object already gone is not an error")
    p = sub.add_parser("get", help="show cached objects")
    p.add_argument("kind")
    p.add_argument("name", nargs="?")
    # Also accepted before the subcommand (``podfit -A get pods``), where the top-level parser sets it.
    p.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        default=argparse.SUPPRESS,
        help="every namespace (default: -n or default)",
    )
    p.add_argument("-l", "--selector", help="label selector, e.g. app=web,tier!=db")
    p = sub.add_parser("describe", help="a node or a pod in detail: labels, taints, allocation, pods")
    p.add_argument("kind", help="node or pod")
    p.add_argument("name")
    for name, text in (
        ("filter", "every node's filter verdict"),
        ("score", "scores of feasible nodes"),
        ("schedule", "filter, score and select a node"),
        ("preempt", "which pods to evict"),
        ("explain", "why a pod is pending (or where it would go), in plain language"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("pod", nargs="?", metavar="POD", help="a pod in the cache, by name (instead of -f)")
        if name == "schedule":
            p.add_argument(
                "-f",
                "--filename",
                action="append",
                help="pod manifests (file or -, repeatable); several pods are scheduled in order as one batch",
            )
        else:
            p.add_argument("-f", "--filename", help="the pod manifest (file or -)")
        p.add_argument("--nodes", help="comma-separated candidate nodes (default: all)")
        p.add_argument("--scheduler-name", default="", help="profile (default: the pod's schedulerName)")
        p.add_argument(
            "--kube-scheduler-version",
            default="",
            help="answer as this kube-scheduler version, e.g. v1.36 (`podfit stats` lists the supported ones; "
            "default: the profile's)",
        )
        if name == "schedule":
            p.add_argument(
                "--assume",
                action="store_true",
                help="reserve the pod (or each of several) on its selected node; without it nothing is reserved",
            )
            p.add_argument("--no-preempt", action="store_true", help="do not compute preemption when nothing fits")
            p.add_argument(
                "--all-or-nothing",
                action="store_true",
                help="several pods: assume none of them unless every one fits (gang scheduling)",
            )
    sub.add_parser("stats", help="cache statistics")
    p = sub.add_parser(
        "wait-ready",
        help="wait until podfit-server answers; fail with its error if it stopped (for start-up scripts)",
    )
    p.add_argument("--pid-file", help="the server's PID file: fail at once if that process has ended")
    p.add_argument("--log", help="the server's log: its last line is the error shown when it ended")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds to wait (default 60)")
    p = sub.add_parser("simulate", help="what if: a scenario (kind: Scenario), then pods placed in it")
    p.add_argument("-f", "--filename", action="append", required=True, help="scenario and pod documents (repeatable)")
    p.add_argument("--scheduler-name", default="", help="profile (default: each pod's schedulerName)")
    p = sub.add_parser("estimate", help="cluster-autoscaler's scale-up estimate per node group")
    p.add_argument(
        "-f", "--filename", action="append", required=True, help="NodeGroup and pending Pod documents (repeatable)"
    )
    p.add_argument("--scheduler-name", default="", help="profile (default: default-scheduler)")
    p = sub.add_parser("drain", help="can these nodes be removed, and where would their pods go (simulation)")
    p.add_argument("node_names", nargs="+", metavar="NODE", help="nodes to remove, simulated in this order")
    p.add_argument("--dry-run", action="store_true", help="required: podfit only simulates")
    for flag in ("system-pods", "local-storage", "custom-controller-pods"):
        p.add_argument(
            f"--skip-nodes-with-{flag}",
            type=_flag,
            nargs="?",
            const=True,
            default=True,
            metavar="true|false",
            help="cluster-autoscaler's flag of the same name (default true)",
        )
    p.add_argument("--min-replica-count", type=int, default=0, metavar="N", help="as cluster-autoscaler (default 0)")
    p.add_argument(
        "--expendable-pods-priority-cutoff",
        type=int,
        default=-10,
        metavar="N",
        help="as cluster-autoscaler: lower-priority pods (unless preemptionPolicy Never) are left out (default -10)",
    )
    p.add_argument(
        "--skip-terminal-pods",
        type=_flag,
        nargs="?",
        const=True,
        default=True,
        metavar="true|false",
        help="leave Succeeded and Failed pods out, as cluster-autoscaler's scale-down loop (default true); "
        "false hands them to the drain rules",
    )
    p.add_argument(
        "--destinations",
        choices=("other-nodes", "all-but-removed"),
        default="other-nodes",
        help="where pods may move: other-nodes (podfit's rule, default: none of the NODEs) or all-but-removed "
        "(cluster-autoscaler's: later NODEs and unremovable ones too)",
    )
    p.add_argument("--now", help="evaluation time, RFC 3339 (default: the server's clock)")
    p = sub.add_parser("bench", help="decision throughput and latency on scheduler_perf workloads")
    p.add_argument(
        "workloads",
        nargs="*",
        help="e.g. SchedulingBasic/5000Nodes_10000Pods, EstimateScaleUp/5000Nodes_50000Pods; 'simulation' for the "
        "four Simulation-service workloads (default: the scheduling ones); 'soak' alone for the soak test; "
        "'mixed' alone for deciders, the extender, a feeder and what-if at once",
    )
    p.add_argument("--phase-seconds", type=float, default=15.0, help="mixed: seconds per phase (default 15)")
    p.add_argument("--nodes", type=int, default=3000, help="mixed: nodes loaded (default 3000)")
    p.add_argument("--pods", type=int, default=15000, help="mixed: bound pods loaded (default 15000)")
    p.add_argument(
        "--extender-url", default="", help="mixed with --target: the server's extender URL prefix (…/scheduler)"
    )
    p.add_argument(
        "--duration",
        type=float,
        default=60.0,
        help="soak: seconds of concurrent feeders and deciders (default 60)",
    )
    p.add_argument(
        "--decisions",
        type=int,
        default=None,
        help="measured decisions per scheduling workload (default 1000); calls per simulation workload "
        "(default: each its own, 5 to 100)",
    )
    p.add_argument("--stream", action="store_true", help="also measure over ScheduleStream")
    p.add_argument("--batch", type=int, default=0, metavar="N", help="also measure ScheduleBatch calls of N pods")
    p.add_argument(
        "--workers",
        type=int,
        default=0,
        metavar="N",
        help="processes of the podfit-server bench starts (its --workers; default 0: one per core, one alone "
        "on two cores); a server given with --target reports its own",
    )
    p.add_argument(
        "--what-if-process",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="whether the podfit-server bench starts answers what-if in a process of its own (default: as "
        "podfit-server does, on)",
    )
    p.add_argument(
        "--clients",
        type=int,
        default=1,
        metavar="K",
        help="unary decisions from K concurrent callers, each on its own connection (default 1)",
    )
    p.add_argument(
        "--view",
        choices=("basic", "full"),
        default="basic",
        help="answers with the outcome only, or every node's verdict and scores (VIEW_FULL)",
    )
    p.add_argument("--json", help="write the results here")
    p = sub.add_parser("feed", help="keep podfit current from a Kubernetes API server (list and watch)")
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG if set, else the in-cluster config)")
    p.add_argument("--context", help="kubeconfig context (default: its current-context)")
    p.add_argument("-l", "--selector", help="label selector for the namespaced kinds, e.g. team=a")
    p.add_argument("--kinds", help="comma-separated kinds to feed, e.g. nodes,pods (default: all ten)")
    p.add_argument("--feeder-name", default="", help="the name MarkSynced logs (default: podfit feed@HOST)")
    p.add_argument(
        "--metrics-exporter",
        choices=("none", "console", "otlp"),
        default="none",
        help="where the podfit.feeder.* metrics go (otlp: OTEL_EXPORTER_OTLP_* configure it)",
    )
    p.add_argument("--log-interval", type=float, default=60.0, metavar="SECONDS", help="summary log period")
    p.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    p = sub.add_parser("conformance", help="replay kube-scheduler's recorded answers and compare")
    p.add_argument("cases", help="cases JSONL file")
    p.add_argument("--report-json", help="write the report here")
    p.add_argument("--show", type=int, default=5, help="how many mismatches to print")
    p = sub.add_parser("completion", help="print a shell completion script (bash, zsh, tcsh or fish)")
    p.add_argument("shell", choices=("bash", "zsh", "tcsh", "fish"))
    for command in sub.choices.values():
        _global_flags(command, defaults=False)
    return parser


def _global_flags(parser: argparse.ArgumentParser, *, defaults: bool) -> None:
    """The connection and output flags, accepted before the subcommand and, like kubectl's, after it
    (``podfit feed --kubeconfig F --target A``). After it they have no defaults of their own, so they
    never undo what was given before."""

    def kw(default: Any) -> dict[str, Any]:
        return {"default": default if defaults else argparse.SUPPRESS}

    parser.add_argument("--target", help=f"server address (default {DEFAULT_TARGET})", **kw(None))
    parser.add_argument("--token", help="bearer token (or PODFIT_TOKEN)", **kw(None))
    parser.add_argument("--token-file", help="read the bearer token from this file", **kw(None))
    parser.add_argument("--tls", action="store_true", help="use TLS with the system trust store", **kw(False))
    parser.add_argument("--ca-file", help="trust this CA (implies --tls)", **kw(None))
    parser.add_argument("--cert-file", help="client certificate for mTLS", **kw(None))
    parser.add_argument("--key-file", help="client key for mTLS", **kw(None))
    parser.add_argument(
        "-o", "--output", choices=OUTPUTS, help="table (default), json, yaml, wide or name", **kw("table")
    )
    parser.add_argument(
        "-n", "--namespace", help="namespace (default: default; podfit feed: all namespaces)", **kw(None)
    )


OUTPUTS = ("table", "json", "yaml", "wide", "name")
_DATA = frozenset({"table", "json", "yaml"})
# The -o values each command honours; any other is refused (exit 2), never silently ignored.
SUPPORTED_OUTPUTS: dict[str, frozenset[str]] = {
    "apply": _DATA | {"name"},
    "delete": _DATA | {"name"},
    "get": frozenset(OUTPUTS),
    "describe": frozenset({"table"}),
    "explain": _DATA,
    **{name: _DATA | {"wide"} for name in ("filter", "score", "schedule", "preempt", "simulate", "estimate", "drain")},
    "stats": _DATA,
    "bench": _DATA,
    "conformance": _DATA,
    "feed": frozenset({"table"}),
    "wait-ready": frozenset({"table"}),
    "completion": frozenset({"table"}),
}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("podfit")
    except PackageNotFoundError:  # pragma: no cover - only when run from a source tree never installed
        return "unknown"


def _completion(parser: argparse.ArgumentParser, shell: str) -> str:
    """shtab writes bash, zsh and tcsh scripts; fish's ``complete`` lines are simple enough to list here."""
    if shell != "fish":
        import shtab

        return str(shtab.complete(parser, shell=shell)).rstrip("\n") + "\n"
    lines = ["complete -c podfit -f"]
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help or "" for c in commands._choices_actions}
    for name, command in commands.choices.items():
        text = helps.get(name, "").replace("'", "")
        lines.append(f"complete -c podfit -n __fish_use_subcommand -a {name} -d '{text}'")
        for action in command._actions:
            longs = [o[2:] for o in action.option_strings if o.startswith("--")]
            shorts = [o[1:] for o in action.option_strings if len(o) == 2]
            if not longs:
                continue
            flags = f"-l {longs[0]}" + (f" -s {shorts[0]}" if shorts else "")
            takes = " -r" if action.nargs != 0 else ""
            text = (action.help or "").replace("'", "")
            lines.append(f"complete -c podfit -n '__fish_seen_subcommand_from {name}' {flags}{takes} -d '{text}'")
    return "\n".join(lines) + "\n"


COMMANDS = {
    "apply": cmd_apply,
    "delete": cmd_delete,
    "get": cmd_get,
    "describe": cmd_describe,
    "filter": cmd_filter,
    "score": cmd_score,
    "schedule": cmd_schedule,
    "preempt": cmd_preempt,
    "explain": cmd_explain,
    "stats": cmd_stats,
    "simulate": cmd_simulate,
    "estimate": cmd_estimate,
    "drain": cmd_drain,
}


def main(argv: Sequence[str] | None = None) -> int:

    parser = build_parser()
    args = parser.parse_args(argv)
    # A command missing from the table gets table/json/yaml (tests/test_cli_habits.py insists on an entry).
    supported = SUPPORTED_OUTPUTS.get(args.command, _DATA)
    if args.output not in supported:
        # Like argparse's own usage errors: one line, exit 2.
        allowed = ", ".join(o for o in OUTPUTS if o in supported)
        print(f"podfit {args.command}: error: -o {args.output} is not supported here (use {allowed})", file=sys.stderr)
        return 2
    if args.all_namespaces and args.command != "get":
        print(f"podfit {args.command}: error: -A/--all-namespaces applies to get only", file=sys.stderr)
        return 2
    if args.command == "completion":
        print(_completion(parser, args.shell), end="")
        return 0
    args.target_given = args.target is not None
    args.target = args.target or DEFAULT_TARGET
    config: ChannelConfig | None = None
    try:
        token = args.token or os.environ.get("PODFIT_TOKEN")
        if args.token_file:
            with open(args.token_file) as handle:
                token = handle.read().strip()
        config = ChannelConfig.from_files(
            args.target,
            token=token,
            ca_file=args.ca_file,
            cert_file=args.cert_file,
            key_file=args.key_file,
            tls=args.tls,
        )
        if args.command == "conformance":
            return cmd_conformance(args, config)
        if args.command == "bench":
            return cmd_bench(args, config)
        if args.command == "feed":
            return cmd_feed(args, config)
        if args.command == "wait-ready":
            return cmd_wait_ready(args, config)
        with Client(config=config) as client:
            return COMMANDS[args.command](client, args)
    except _NotFound as exc:
        print(exc, file=sys.stderr)
        return 1
    except PodfitError as exc:
        hint = connection_hint(exc, config) if config is not None else ""
        if hint and config is not None:
            # gRPC's own words ("failed to connect to all addresses; ... Socket closed") only hide the fix.
            print(f"podfit: {exc.code.name}: cannot talk to {config.target}: {hint}", file=sys.stderr)
            return 1
        fields = "".join(f" [{f}: {d}]" for f, d in exc.field_violations if f and f not in exc.message)
        print(f"podfit: {exc}{fields}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # `podfit get pods -A | head`: the reader has all it wants. Quietly, as kubectl; stdout goes to
        # /dev/null so that the interpreter's final flush does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (ConversionError, OSError, ValueError, RuntimeError) as exc:
        print(f"podfit: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
