"""Manifests in, podfit.v1 messages out: dicts, YAML/JSON text, JSON Lines, ``kind: List``, files,
directories, stdin, and objects of the official ``kubernetes`` Python client when it is installed."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml
from google.protobuf.message import Message
from podfit.k8s.convert import KINDS, ConversionError, manifest_to_object
from podfit.v1 import cluster_cache_pb2 as cc
from podfit.v1 import objects_pb2 as ob
from podfit.v1 import scheduler_pb2 as sc

Manifest = Mapping[str, Any]
_SUFFIXES = (".yaml", ".yml", ".json", ".jsonl")


def _from_kubernetes_client(obj: Any) -> Manifest | None:
    """Objects of the official client (V1Pod, ...) serialise to their Kubernetes JSON."""
    if not hasattr(obj, "openapi_types") or not hasattr(obj, "attribute_map"):
        return None
    try:
        from kubernetes.client import ApiClient  # type: ignore[import-not-found, unused-ignore]
    except ImportError:  # pragma: no cover - only with the kubernetes package missing
        return None
    data = ApiClient().sanitize_for_serialization(obj)
    if isinstance(data, dict) and "kind" not in data:
        kind = type(obj).__name__
        data["kind"] = kind[2:] if kind.startswith("V1") else kind
    return data if isinstance(data, dict) else None


# libyaml's C loader parses a 150,000-pod file about ten times faster; the pure-Python one is the fallback.
_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# Where a manifest came from: "cluster.yaml: document 3" (documents count from 1, as editors show them).
Located = tuple[str, Manifest]


def parse_text(text: str, source: str = "<text>") -> list[Manifest]:
    """Multi-document YAML, a JSON document, or JSON Lines; ``kind: List`` is flattened."""
    return [manifest for _, manifest in parse_located(text, source)]


def parse_located(text: str, source: str = "<text>", progress: Callable[[], object] | None = None) -> list[Located]:
    """``parse_text`` with each manifest's file and document, for error messages that point at it;
    ``progress`` is called once per document read (a big file takes a while)."""
    stripped = text.lstrip()
    documents: list[Any]
    if stripped.startswith("{") and "\n{" in stripped.rstrip():
        try:
            documents = [json.loads(line) for line in text.splitlines() if line.strip()]
        except json.JSONDecodeError:
            documents = _yaml_documents(text, source, progress)
    else:
        documents = _yaml_documents(text, source, progress)
    result: list[Located] = []
    for i, doc in enumerate(documents):
        # Empty documents keep their number, so "document 3" is the third an editor shows.
        if doc is not None:
            result.extend(_flatten(doc, f"{source}: document {i + 1}"))
    return result


def _yaml_documents(text: str, source: str, progress: Callable[[], object] | None = None) -> list[Any]:
    documents = []
    try:
        for document in yaml.load_all(text, Loader=_YAML_LOADER):
            documents.append(document)
            if progress is not None:
                progress()
    except yaml.YAMLError as exc:
        raise ConversionError(source, f"not valid YAML or JSON: {' '.join(str(exc).split())}") from None
    return documents


def _flatten(doc: Any, at: str) -> Iterator[Located]:
    if not isinstance(doc, Mapping):
        raise ConversionError(at, "a manifest must be a mapping")
    if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
        for j, item in enumerate(doc["items"]):
            yield from _flatten(item, f"{at}: items[{j}]")
    else:
        yield at, doc


def load_located(source: str, progress: Callable[[], object] | None = None) -> list[Located]:
    """The manifests of a path (file or directory) or "-" (stdin), each with its file and document."""
    if source == "-":
        return parse_located(sys.stdin.read(), "<stdin>", progress)
    target = Path(source)
    if target.is_dir():
        result: list[Located] = []
        for file in sorted(p for p in target.rglob("*") if p.suffix in _SUFFIXES and p.is_file()):
            result.extend(parse_located(file.read_text(), str(file), progress))
        return result
    try:
        return parse_located(target.read_text(), source, progress)
    except OSError as exc:
        raise ConversionError(source, f"cannot read: {exc.strerror}") from None


def load_manifests(source: Any) -> list[Manifest]:
    """Everything ``podfit apply -f`` accepts: a path (file or directory), "-" for stdin, text, a
    mapping, a Kubernetes client object, or an iterable of those."""
    if isinstance(source, Mapping):
        return [m for _, m in _flatten(source, "manifest")]
    converted = _from_kubernetes_client(source)
    if converted is not None:
        return [converted]
    if isinstance(source, Path) or (
        isinstance(source, str) and "\n" not in source and not source.lstrip().startswith("{")
    ):
        return _load_path(str(source))
    if isinstance(source, str | bytes):
        return parse_text(source.decode() if isinstance(source, bytes) else source)
    if isinstance(source, Iterable):
        result: list[Manifest] = []
        for item in source:
            result.extend(load_manifests(item))
        return result
    raise ConversionError("manifest", f"cannot read manifests from {type(source).__name__}")


def _load_path(path: str) -> list[Manifest]:
    return [manifest for _, manifest in load_located(path)]


def to_cluster_object(manifest: Any, kind: str | None = None) -> cc.ClusterObject:
    """A manifest as a ClusterObject; ``kind`` fills in for manifests without one (e.g. bare nodes)."""
    if isinstance(manifest, cc.ClusterObject):
        return manifest
    if isinstance(manifest, Message):
        for field, cls, _ in KINDS.values():
            if isinstance(manifest, cls):
                obj = cc.ClusterObject()
                getattr(obj, field).CopyFrom(manifest)
                return obj
        raise ConversionError("manifest", f"{type(manifest).__name__} is not a cluster object")
    converted = _from_kubernetes_client(manifest)
    data = converted if converted is not None else manifest
    if kind and isinstance(data, Mapping) and not data.get("kind"):
        data = {**data, "kind": kind}
    return manifest_to_object(data)


def to_pod_reference(pod: Any) -> sc.PodReference:
    """A pod given by value (dict, YAML/JSON text, Pod message, client object) or as "namespace/name"
    of a pod already in the cache."""
    if isinstance(pod, sc.PodReference):
        return pod
    if isinstance(pod, ob.Pod):
        return sc.PodReference(pod=pod)
    if isinstance(pod, str) and "\n" not in pod and not pod.lstrip().startswith("{") and ":" not in pod:
        namespace, _, name = pod.rpartition("/")
        return sc.PodReference(cached=cc.ObjectKey(kind=cc.OBJECT_KIND_POD, namespace=namespace, name=name))
    manifests = load_manifests(pod) if isinstance(pod, str | bytes) else [pod]
    pods = [m for m in manifests if not isinstance(m, Mapping) or m.get("kind", "Pod") == "Pod"]
    if len(pods) != 1:
        raise ConversionError("pod", f"expected exactly one Pod manifest, found {len(pods)}")
    first = pods[0]
    if isinstance(first, Mapping) and "kind" not in first:
        first = {**first, "kind": "Pod"}
    return sc.PodReference(pod=to_cluster_object(first).pod)
