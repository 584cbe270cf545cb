"""In-process replay of conformance cases: builds a cache from a case and answers in ``expect`` shape.

The gRPC runner (``podfit conformance``) is the yardstick; this is the fast path plugin tests use, and
``assert_every_case_passed`` is how the suite judges a runner's report.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from podfit.client.conformance_compare import Report
from podfit.server.cache.cluster_cache import ClusterCache, Upsert
from podfit.server.config import default_profile
from podfit.server.engine import Decision, Engine
from podfit.server.model import Kind
from podfit.server.model.decode import object_from_k8s
from podfit.server.model.objects import pod_from_k8s

from tests.corpora import corpus

CASES = corpus("cases-public.jsonl")

_CASE_KINDS = (
    ("nodes", Kind.NODE),
    ("pods", Kind.POD),
    ("namespaces", Kind.NAMESPACE),
    ("pdbs", Kind.POD_DISRUPTION_BUDGET),
    ("replicasets", Kind.REPLICA_SET),
    ("services", Kind.SERVICE),
    ("storageclasses", Kind.STORAGE_CLASS),
    ("persistentvolumes", Kind.PERSISTENT_VOLUME),
    ("persistentvolumeclaims", Kind.PERSISTENT_VOLUME_CLAIM),
    ("csinodes", Kind.CSI_NODE),
    ("csidrivers", Kind.CSI_DRIVER),
    ("csistoragecapacities", Kind.CSI_STORAGE_CAPACITY),
    ("volumeattachments", Kind.VOLUME_ATTACHMENT),
    ("deviceclasses", Kind.DEVICE_CLASS),
    ("resourceslices", Kind.RESOURCE_SLICE),
    ("resourceclaims", Kind.RESOURCE_CLAIM),
)


def load_cases(path: Path = CASES) -> Iterator[dict[str, Any]]:
    with gzip.open(path, "rt") if path.suffix == ".gz" else path.open() as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def cache_from_case(case: Mapping[str, Any]) -> ClusterCache:
    cache = ClusterCache()
    changes = []
    for field, kind in _CASE_KINDS:
        for i, obj in enumerate(case.get(field) or ()):
            changes.append(Upsert(kind, object_from_k8s(kind, obj, f"{field}[{i}]"), json.dumps(obj).encode()))
    cache.apply(changes)
    return cache


def decision_to_expect(decision: Decision) -> dict[str, Any]:
    filter_ = {}
    for verdict in decision.verdicts:
        status = verdict.status
        if status is None:
            filter_[verdict.node_name] = {"fits": True, "plugin": "", "reasons": [], "code": "Success"}
        else:
            filter_[verdict.node_name] = {
                "fits": False,
                "plugin": status.plugin,
                "reasons": list(status.reasons),
                "code": status.code.value,
            }
    return {
        "gated": decision.gated,
        "filter": filter_,
        "scores": {s.node_name: {"total": s.total, "plugins": dict(s.plugins)} for s in decision.scores},
        "best": decision.best,
        "preemption": None,
    }


def evaluate_case(case: Mapping[str, Any]) -> dict[str, Any]:
    """The answer of the case's kube-scheduler version (v1.35.4 when the case names none)."""
    cache = cache_from_case(case)
    version = case.get("kube_scheduler_version", "v1.35.4")
    engine = Engine(cache, {"default-scheduler": default_profile(version=version)})
    pod = pod_from_k8s(case["pod"])
    snapshot = cache.snapshot()
    decision, _, _ = engine.decide(pod, snapshot=snapshot)
    answer = decision_to_expect(decision)
    answer["postfilter"] = ""
    answer["status"] = decision.message
    if not decision.gated and not decision.failed and not decision.best:
        result = engine.preempt(pod, snapshot=snapshot)
        answer["preemption"] = {
            "node": result.nominated_node,
            "victims": sorted(v.key for v in result.victims),
            "node_ties": list(result.node_ties),
        }
        answer["postfilter"] = result.postfilter
    return answer


def assert_every_case_passed(report: Report, cases: Sequence[Mapping[str, Any]], what: str) -> None:
    """Every case of ``cases`` was replayed, compared on something and matched. A case with nothing to
    compare is a failure in the report ("nothing compared: ..."), never a pass; an empty corpus fails."""
    failed = [f["id"] for f in report.failures]
    details = "\n".join(f"{f['id']}: {f['diff']}" for f in report.failures[:3])
    assert not failed, f"{len(failed)} of {len(cases)} {what} cases failed: {failed[:10]}\n{details}"
    assert cases, f"no {what} case: nothing compared"
    assert report.ok and report.total == report.passed == len(cases), (report.total, report.passed, len(cases))
