"""Profiles from a ``kubescheduler.config.k8s.io/v1`` KubeSchedulerConfiguration, merged and expanded
the way kube-scheduler does it; the default profile equals kube-scheduler's of the profile's version.

Each profile answers as one kube-scheduler version (the server's, or its own from ``profileVersions``);
a request may ask for another, and ``profile_at`` builds the same configuration at that version.

Merging follows upstream's ``mergePluginSet`` (custom entries override defaults in place, ``disabled``
removes, ``*`` removes all) and the framework's multi-point expansion (plugins named at a specific
extension point keep their order there; multi-point plugins follow; score weights default to 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from podfit.server.framework.interfaces import (
    FilterPlugin,
    Plugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from podfit.server.framework.profile import Profile, WeightedScorePlugin, default_plugins
from podfit.server.framework.versions import DEFAULT_VERSION, VERSIONS, KubeSchedulerVersion, parse_version
from podfit.server.model import ValidationError
from podfit.server.model.objects import DEFAULT_SCHEDULER_NAME
from podfit.server.plugins import REGISTRY

API_VERSION = "kubescheduler.config.k8s.io/v1"
POINTS = (
    "preEnqueue",
    "queueSort",
    "preFilter",
    "filter",
    "postFilter",
    "preScore",
    "score",
    "reserve",
    "permit",
    "preBind",
    "bind",
    "postBind",
)
# Upstream plugins podfit accepts in configurations but has nothing to model for (no volumes, queue or
# binding): enabling or disabling them never changes an answer here.
INERT_PLUGINS = frozenset({"PrioritySort", "DefaultBinder"})
MAX_WEIGHT = 100  # upstream's MaxWeight for a single plugin is MaxTotalScore/MaxNodeScore; 100 is ample.


class ConfigError(ValueError):
    """An invalid KubeSchedulerConfiguration; the message starts with the offending field path."""


@dataclass(frozen=True)
class ProfileSpec:
    """What a profile was built from, so that it can be built again at another version."""

    plugins: Mapping[str, Any] = field(default_factory=dict)
    args: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    where: str = "profiles[0]"
    feature_gates: Mapping[str, bool] = field(default_factory=dict)


def default_profile(
    scheduler_name: str = DEFAULT_SCHEDULER_NAME,
    version: str = DEFAULT_VERSION,
    feature_gates: Mapping[str, bool] | None = None,
) -> Profile:
    """kube-scheduler's default profile at ``version`` (``v1.35``, ``v1.37.2`` ...)."""
    return _profile(
        scheduler_name, ProfileSpec(feature_gates=dict(feature_gates or {})), VERSIONS[parse_version(version).name]
    )


def profile_at(profile: Profile, version: KubeSchedulerVersion) -> Profile:
    """The same configuration as ``profile``, answering as ``version``."""
    if profile.version is version:
        return profile
    spec = profile.spec if isinstance(profile.spec, ProfileSpec) else ProfileSpec()
    return _profile(profile.scheduler_name, spec, version)


def profiles_from_configuration(
    document: Mapping[str, Any] | None,
    version: str = DEFAULT_VERSION,
    feature_gates: Mapping[str, bool] | None = None,
    profile_versions: Mapping[str, str] | None = None,
) -> dict[str, Profile]:
    """Profiles by scheduler name; the built-in default profile when no document is given. Each answers
    as ``profile_versions[name]`` when given, else as ``version``; ``feature_gates`` apply to all, each
    profile checking them at its own version (a gate locked there, not modelled there, or absent from its
    registry is a ConfigError naming the gate and the profile; a gate locked only in another version is
    accepted)."""
    gates = dict(feature_gates or {})
    versions = dict(profile_versions or {})

    def version_of(name: str) -> KubeSchedulerVersion:
        try:
            if name in versions:
                return parse_version(versions[name], f"profileVersions.{name}")
            return parse_version(version, "kubeSchedulerVersion")
        except ValidationError as exc:
            raise ConfigError(str(exc)) from None

    profiles: dict[str, Profile] = {}
    if document is None:
        spec = ProfileSpec(feature_gates=gates)
        profiles[DEFAULT_SCHEDULER_NAME] = _profile(DEFAULT_SCHEDULER_NAME, spec, version_of(DEFAULT_SCHEDULER_NAME))
        _check_profile_versions(versions, profiles)
        return profiles
    if document.get("apiVersion") != API_VERSION:
        raise ConfigError(f"apiVersion: must be {API_VERSION}, not {document.get('apiVersion')!r}")
    raw_profiles = document.get("profiles")
    if raw_profiles is None:
        raw_profiles = [{"schedulerName": DEFAULT_SCHEDULER_NAME}]
    if not isinstance(raw_profiles, list) or not raw_profiles:
        raise ConfigError("profiles: must be a non-empty list")
    for i, raw in enumerate(raw_profiles):
        where = f"profiles[{i}]"
        if not isinstance(raw, Mapping):
            raise ConfigError(f"{where}: must be a mapping")
        name = raw.get("schedulerName", DEFAULT_SCHEDULER_NAME)
        if not isinstance(name, str) or not name:
            raise ConfigError(f"{where}.schedulerName: Required value")
        if name in profiles:
            raise ConfigError(f"{where}.schedulerName: Duplicate value: {name!r}")
        plugins = raw.get("plugins") or {}
        if not isinstance(plugins, Mapping):
            raise ConfigError(f"{where}.plugins: must be a mapping")
        args = _plugin_args(raw.get("pluginConfig") or [], f"{where}.pluginConfig")
        profiles[name] = _profile(name, ProfileSpec(plugins, args, where, gates), version_of(name))
    _check_profile_versions(versions, profiles)
    return profiles


def _check_profile_versions(versions: Mapping[str, str], profiles: Mapping[str, Profile]) -> None:
    unknown = sorted(set(versions) - set(profiles))
    if unknown:
        raise ConfigError(
            f"profileVersions.{unknown[0]}: no profile has this schedulerName (profiles: {', '.join(profiles)})"
        )


def _plugin_args(raw: Any, where: str) -> dict[str, Mapping[str, Any]]:
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: must be a list")
    result: dict[str, Mapping[str, Any]] = {}
    for j, entry in enumerate(raw):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ConfigError(f"{where}[{j}].name: Required value")
        name = entry["name"]
        if name in result:
            raise ConfigError(f"{where}[{j}].name: Duplicate value: {name!r}")
        if name not in REGISTRY and name not in INERT_PLUGINS:
            raise ConfigError(f"{where}[{j}].name: plugin {name!r} does not exist")
        args = entry.get("args") or {}
        if not isinstance(args, Mapping):
            raise ConfigError(f"{where}[{j}].args: must be a mapping")
        result[name] = {k: v for k, v in args.items() if k not in ("apiVersion", "kind")}
    return result


def _plugin_set(raw: Any, where: str) -> tuple[list[tuple[str, int]], set[str]]:
    """(enabled [(name, weight)], disabled names) of one extension point's configuration."""
    if raw is None:
        return [], set()
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{where}: must be a mapping")
    enabled: list[tuple[str, int]] = []
    for k, entry in enumerate(raw.get("enabled") or []):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ConfigError(f"{where}.enabled[{k}].name: Required value")
        name = entry["name"]
        if name not in REGISTRY and name not in INERT_PLUGINS:
            raise ConfigError(f"{where}.enabled[{k}].name: plugin {name!r} does not exist")
        weight = entry.get("weight", 0)
        if not isinstance(weight, int) or isinstance(weight, bool) or weight < 0 or weight > MAX_WEIGHT:
            raise ConfigError(f"{where}.enabled[{k}].weight: must be an integer between 0 and {MAX_WEIGHT}")
        enabled.append((name, weight))
    disabled: set[str] = set()
    for k, entry in enumerate(raw.get("disabled") or []):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str):
            raise ConfigError(f"{where}.disabled[{k}].name: Required value")
        disabled.add(entry["name"])
    return enabled, disabled


def _merge(
    defaults: Sequence[tuple[str, int]], enabled: list[tuple[str, int]], disabled: set[str]
) -> list[tuple[str, int]]:
    """Upstream's mergePluginSet."""
    custom = {name: (index, (name, weight)) for index, (name, weight) in enumerate(enabled)}
    replaced: set[int] = set()
    merged: list[tuple[str, int]] = []
    if "*" not in disabled:
        for name, weight in defaults:
            if name in disabled:
                continue
            if name in custom:
                index, entry = custom[name]
                replaced.add(index)
                merged.append(entry)
            else:
                merged.append((name, weight))
    merged.extend(entry for index, entry in enumerate(enabled) if index not in replaced)
    return merged


def _implements(plugin: Plugin, point: str) -> bool:
    checks: dict[str, Any] = {
        "preEnqueue": PreEnqueuePlugin,
        "preFilter": PreFilterPlugin,
        "filter": FilterPlugin,
        "preScore": PreScorePlugin,
        "score": ScorePlugin,
        "reserve": ReservePlugin,
    }
    if point == "postFilter":
        return hasattr(plugin, "post_filter")
    check = checks.get(point)
    return check is not None and isinstance(plugin, check)


def _profile(name: str, spec: ProfileSpec, version: KubeSchedulerVersion) -> Profile:
    plugins, args, where = spec.plugins, spec.args, spec.where
    try:
        features = version.features(spec.feature_gates)
    except ValidationError as exc:
        raise ConfigError(f"{exc} (profile {name!r} answers as {version.release})") from None
    for key in plugins:
        if key != "multiPoint" and key not in POINTS:
            raise ConfigError(f"{where}.plugins.{key}: unknown extension point")
    mp_enabled, mp_disabled = _plugin_set(plugins.get("multiPoint"), f"{where}.plugins.multiPoint")
    multi_point = _merge(default_plugins(features), mp_enabled, mp_disabled)
    seen: set[str] = set()
    for plugin_name, _ in multi_point:
        if plugin_name in seen:
            raise ConfigError(f"{where}.plugins.multiPoint.enabled: plugin {plugin_name!r} is registered twice")
        seen.add(plugin_name)
    points = {point: _plugin_set(plugins.get(point), f"{where}.plugins.{point}") for point in POINTS}

    profile = Profile(scheduler_name=name, version=version, features=features, spec=spec)
    # A weight given at the score point wins over the multi-point one; 0 means the default, 1.
    weights = dict(multi_point)
    weights.update(points["score"][0])

    def instance(plugin_name: str) -> Plugin | None:
        if plugin_name in INERT_PLUGINS:
            return None
        plugin = profile.plugins.get(plugin_name)
        if plugin is None:
            try:
                plugin = REGISTRY[plugin_name](args.get(plugin_name, {}), features)
            except ValueError as exc:
                index = list(args).index(plugin_name) if plugin_name in args else 0
                raise ConfigError(f"{where}.pluginConfig[{index}].args: {exc}") from exc
            profile.plugins[plugin_name] = plugin
        return plugin

    for point in ("preEnqueue", "preFilter", "filter", "postFilter", "preScore", "score", "reserve"):
        enabled, disabled = points[point]
        specific = [plugin_name for plugin_name, _ in enabled]
        ordered: list[str] = []
        if "*" not in disabled:
            from_multi = [
                plugin_name
                for plugin_name, _ in multi_point
                if plugin_name not in disabled and (p := instance(plugin_name)) is not None and _implements(p, point)
            ]
            overrides = [n for n in specific if n in from_multi]
            ordered = (
                overrides + [n for n in from_multi if n not in specific] + [n for n in specific if n not in from_multi]
            )
        else:
            ordered = specific
        for plugin_name in ordered:
            plugin = instance(plugin_name)
            if plugin is None:
                continue
            if not _implements(plugin, point):
                raise ConfigError(f"{where}.plugins.{point}: plugin {plugin_name!r} does not extend {point}")
            if point == "preEnqueue":
                profile.pre_enqueue.append(plugin)  # type: ignore[arg-type]
            elif point == "preFilter":
                profile.pre_filter.append(plugin)  # type: ignore[arg-type]
            elif point == "filter":
                profile.filter.append(plugin)  # type: ignore[arg-type]
            elif point == "postFilter":
                profile.post_filter.append(plugin)
            elif point == "preScore":
                profile.pre_score.append(plugin)  # type: ignore[arg-type]
            elif point == "reserve":
                profile.reserve.append(plugin)  # type: ignore[arg-type]
            else:
                weight = weights.get(plugin_name, 0) or 1
                profile.score.append(WeightedScorePlugin(plugin, weight))  # type: ignore[arg-type]
    for plugin_name in args:
        if plugin_name not in profile.plugins and plugin_name not in INERT_PLUGINS:
            instance(plugin_name)
    return profile
