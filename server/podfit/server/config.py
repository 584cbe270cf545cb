"""Profiles from a KubeSchedulerConfiguration; the default profile equals kube-scheduler v1.35's."""

from __future__ import annotations

from podfit.server.framework.profile import DEFAULT_MULTI_POINT, Profile, build_profile
from podfit.server.model.objects import DEFAULT_SCHEDULER_NAME
from podfit.server.plugins import REGISTRY


def default_profile(scheduler_name: str = DEFAULT_SCHEDULER_NAME) -> Profile:
    multi_point = [(name, weight) for name, weight in DEFAULT_MULTI_POINT if name in REGISTRY]
    return build_profile(scheduler_name, multi_point, REGISTRY)
