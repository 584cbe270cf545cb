"""The podfit Python SDK: async and sync clients that take Kubernetes manifests as they come."""

from podfit.client import _grpc_logging  # noqa: F401  (before grpc is imported)
from podfit.client._requests import schedule_request
from podfit.client.aio import AsyncClient
from podfit.client.errors import PodfitError
from podfit.client.manifests import load_manifests, to_cluster_object
from podfit.client.sync import Client

__all__ = ["AsyncClient", "Client", "PodfitError", "load_manifests", "schedule_request", "to_cluster_object"]
