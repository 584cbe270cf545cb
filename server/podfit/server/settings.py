"""Server settings: embedded defaults < the YAML file (--config) < environment variables < flags.

The configuration file may hold several YAML documents: one ``kind: PodfitConfiguration`` with server
settings and one ``kind: KubeSchedulerConfiguration`` with scheduling profiles; either may be absent.
"""

from __future__ import annotations

import argparse
import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml
from podfit.server.budget import Limits
from podfit.server.framework.versions import DEFAULT_VERSION, VERSIONS, parse_feature_gates, parse_version
from podfit.server.model import ValidationError

DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024


class SettingsError(ValueError):
    """Invalid configuration: refused at start, with the field named."""


@dataclass(frozen=True)
class Settings:
    # Loopback by default: a wider address needs caller authentication or insecure_listen_any.
    grpc_addr: str = "127.0.0.1:50051"
    # The kube-scheduler extender HTTP endpoint; "" or "off" disables it.
    extender_addr: str = "127.0.0.1:8888"
    extender_url_prefix: str = "/scheduler"
    # The extender's bind verb changes the cache, so it answers only when enabled (and then only for a
    # pod that still fits the node, as an assume would).
    extender_bind: bool = False
    # Liveness/readiness over plain HTTP (/healthz, /readyz only), for kubelet probes when the gRPC and
    # extender listeners demand client certificates; "" or "off" disables it.
    probe_addr: str = "off"
    # Largest extender request body (413 above it); kube-scheduler without a node cache sends ~150 B/node.
    extender_max_body_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # An extender connection with no request in progress (before its first, or between requests) is
    # closed after this long, so idle or half-sent connections cannot pile up.
    extender_idle_timeout_seconds: float = 60.0
    # cluster-autoscaler's gRPC expander (grpcplugin.Expander); "" or "off" disables it. Always TLS, with
    # the certificate above: cluster-autoscaler refuses plaintext and presents no client certificate.
    ca_expander_addr: str = "off"
    # The expander authenticates no caller (cluster-autoscaler presents no client certificate): off
    # loopback it serves only when the operator says so here.
    ca_expander_unauthenticated: bool = False
    # Prometheus /metrics over plain HTTP; "" or "off" disables it. Loopback by default: a deployment that
    # wants it scraped says 0.0.0.0:9464 (deploy/kubernetes does). 9464 is OpenTelemetry's Prometheus port.
    metrics_addr: str = "127.0.0.1:9464"
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    # TLS: serve TLS when cert and key are set; require client certificates (mTLS) when a CA is set too.
    tls_cert_file: str = ""
    tls_key_file: str = ""
    tls_client_ca_file: str = ""
    # Bearer-token auth: clients send "authorization: Bearer <token>"; the token is read from this file
    # and has the admin role (one token, full access).
    auth_token_file: str = ""
    # kube-apiserver-style static token file: "token,role[,name]" lines, role read, write or admin.
    auth_tokens_file: str = ""
    # Listen on non-loopback addresses even though nothing authenticates callers (no token, no client CA).
    insecure_listen_any: bool = False
    telemetry_exporter: str = "none"
    memo_ttl_seconds: float = 30.0
    memo_backend: str = "memory"
    # HOST:PORT of the redis or memcached server holding the memo; "": the backend's default (localhost).
    memo_address: str = ""
    log_level: str = "INFO"
    log_format: str = "json"
    # SIGTERM: report NOT_SERVING but keep serving for shutdownDelaySeconds (load balancers notice), then
    # answer what has arrived within shutdownGraceSeconds and exit (see podfit.server.lifecycle).
    shutdown_grace_seconds: float = 10.0
    shutdown_delay_seconds: float = 0.0
    # Refuse decisions (FAILED_PRECONDITION, the extender's 503) and report NOT_SERVING until a feeder's
    # MarkSynced says its initial list of every kind is in the cache; off: synced from the start.
    wait_for_sync: bool = False
    # Per-request limits (podfit.server.budget.Limits), checked before any work.
    limits_hypothetical_nodes: int = 10_000
    limits_pods_per_request: int = 10_000
    limits_drain_nodes: int = 1_000
    limits_new_nodes_per_estimate: int = 1_000
    limits_expansion_options: int = 1_000
    limits_pods_per_option: int = 10_000
    limits_template_devices: int = 100_000
    limits_heavy_calls_waiting: int = 8
    limits_heavy_call_seconds: int = 30
    # The kube-scheduler version decisions answer as unless a profile or a request says otherwise.
    kube_scheduler_version: str = DEFAULT_VERSION
    # kube-scheduler's --feature-gates: "A=true,B=false" (or a mapping in the file), for every version
    # that has the gate; locks, unmodelled values and gates the version lacks are checked per profile,
    # at its version (config).
    feature_gates: str = ""
    # The KubeSchedulerConfiguration document, if any (validated by podfit.server.config).
    scheduler_configuration: Mapping[str, Any] | None = field(default=None, compare=False)
    # Per profile (scheduler name): the version it answers as, overriding kube_scheduler_version.
    profile_versions: Mapping[str, str] = field(default_factory=dict, compare=False)
    # Processes answering on the listeners: the cache's owner plus workers - 1 decision workers
    # (podfit.server.transport.workers); 0: one per core this process may use.
    workers: int = 0
    # Wherever there are two cores or more: what-if questions (Simulate, EstimateScaleUp, SimulateDrain,
    # BestOptions) are answered by a process of their own (podfit.server.transport.what_if).
    what_if_process: bool = True
    # TLS to the replicated log's engine (podfit.server.transport.replicated): the CA its nodes' certificates
    # are checked against ("": the system's), and this replica's client certificate and key, for an engine
    # that asks for one (nats-server's ``verify: true``). Any of them set: the engine is reached over TLS.
    replication_tls_ca_file: str = ""
    replication_tls_cert_file: str = ""
    replication_tls_key_file: str = ""
    # Replicas on a replicated log (podfit.server.transport.replicated): the engine's NATS URLs, comma-
    # separated ("": one process, no engine), this replica's peer address, the group's shared key file,
    # the owner's lease and how many log entries go between two snapshots.
    replicated_log: str = ""
    replica_addr: str = ""
    replication_key_file: str = ""
    replication_lease_seconds: float = 5.0
    replication_snapshot_entries: int = 1_000
    # Who may own the group: "kubernetes" (a coordination.k8s.io/v1 Lease), "engine" (a key of the engine's
    # KV), or "" — a Lease when running in a cluster (a service-account token and KUBERNETES_SERVICE_HOST) or
    # when replication_kubeconfig is set, the engine's KV elsewhere. The Lease's namespace ("": the pod's
    # own, from its service account, else "default") and name; a kubeconfig file to reach the API server
    # with instead of the pod's service account.
    replication_election: str = ""
    replication_lease_namespace: str = ""
    replication_lease_name: str = "podfit-replicas"
    replication_kubeconfig: str = ""
    # Set only in a decision worker, by its owner: the owner's private socket.
    follow_owner: str = ""
    # Set only in the what-if process, by its owner.
    what_if_role: bool = False

    @property
    def limits(self) -> Limits:
        return Limits(
            hypothetical_nodes=self.limits_hypothetical_nodes,
            pods_per_request=self.limits_pods_per_request,
            drain_nodes=self.limits_drain_nodes,
            new_nodes_per_estimate=self.limits_new_nodes_per_estimate,
            expansion_options=self.limits_expansion_options,
            pods_per_option=self.limits_pods_per_option,
            template_devices=self.limits_template_devices,
            heavy_calls_waiting=self.limits_heavy_calls_waiting,
            heavy_call_seconds=self.limits_heavy_call_seconds,
        )

    @property
    def feature_gate_overrides(self) -> dict[str, bool]:
        """The parsed --feature-gates; SettingsError naming the gate when no supported version has it.
        A gate locked in, or absent from, the version a profile answers as is refused when the profiles
        are built."""
        try:
            return parse_feature_gates(self.feature_gates, "featureGates")
        except ValidationError as exc:
            raise SettingsError(str(exc)) from None

    @property
    def memo_options(self) -> dict[str, Any]:
        """The remote memo's connection options (aiocache's endpoint and port)."""
        if not self.memo_address:
            return {}
        host, _, port = self.memo_address.rpartition(":")
        return {"endpoint": host.strip("[]"), "port": int(port)}

    @property
    def extender_enabled(self) -> bool:
        return self.extender_addr not in ("", "off")


# setting name -> (YAML key in PodfitConfiguration, environment variable)
_SOURCES = {
    "grpc_addr": ("grpcAddr", "PODFIT_GRPC_ADDR"),
    "extender_addr": ("extender.addr", "PODFIT_EXTENDER_ADDR"),
    "extender_url_prefix": ("extender.urlPrefix", "PODFIT_EXTENDER_URL_PREFIX"),
    "extender_bind": ("extender.bind", "PODFIT_EXTENDER_BIND"),
    "probe_addr": ("probeAddr", "PODFIT_PROBE_ADDR"),
    "extender_max_body_bytes": ("extender.maxBodyBytes", "PODFIT_EXTENDER_MAX_BODY_BYTES"),
    "extender_idle_timeout_seconds": ("extender.idleTimeoutSeconds", "PODFIT_EXTENDER_IDLE_TIMEOUT_SECONDS"),
    "ca_expander_addr": ("caExpander.addr", "PODFIT_CA_EXPANDER_ADDR"),
    "ca_expander_unauthenticated": ("caExpander.unauthenticated", "PODFIT_CA_EXPANDER_UNAUTHENTICATED"),
    "metrics_addr": ("metrics.addr", "PODFIT_METRICS_ADDR"),
    "max_message_bytes": ("maxMessageBytes", "PODFIT_MAX_MESSAGE_BYTES"),
    "tls_cert_file": ("tls.certFile", "PODFIT_TLS_CERT_FILE"),
    "tls_key_file": ("tls.keyFile", "PODFIT_TLS_KEY_FILE"),
    "tls_client_ca_file": ("tls.clientCAFile", "PODFIT_TLS_CLIENT_CA_FILE"),
    "auth_token_file": ("auth.tokenFile", "PODFIT_AUTH_TOKEN_FILE"),
    "auth_tokens_file": ("auth.tokensFile", "PODFIT_AUTH_TOKENS_FILE"),
    "insecure_listen_any": ("insecureListenAny", "PODFIT_INSECURE_LISTEN_ANY"),
    "telemetry_exporter": ("telemetry.exporter", "PODFIT_TELEMETRY_EXPORTER"),
    "memo_ttl_seconds": ("memo.ttlSeconds", "PODFIT_MEMO_TTL_SECONDS"),
    "memo_backend": ("memo.backend", "PODFIT_MEMO_BACKEND"),
    "memo_address": ("memo.address", "PODFIT_MEMO_ADDRESS"),
    "log_level": ("log.level", "PODFIT_LOG_LEVEL"),
    "log_format": ("log.format", "PODFIT_LOG_FORMAT"),
    "shutdown_grace_seconds": ("shutdownGraceSeconds", "PODFIT_SHUTDOWN_GRACE_SECONDS"),
    "shutdown_delay_seconds": ("shutdownDelaySeconds", "PODFIT_SHUTDOWN_DELAY_SECONDS"),
    "wait_for_sync": ("waitForSync", "PODFIT_WAIT_FOR_SYNC"),
    "kube_scheduler_version": ("kubeSchedulerVersion", "PODFIT_KUBE_SCHEDULER_VERSION"),
    "limits_hypothetical_nodes": ("limits.hypotheticalNodes", "PODFIT_LIMITS_HYPOTHETICAL_NODES"),
    "limits_pods_per_request": ("limits.podsPerRequest", "PODFIT_LIMITS_PODS_PER_REQUEST"),
    "limits_drain_nodes": ("limits.drainNodes", "PODFIT_LIMITS_DRAIN_NODES"),
    "limits_new_nodes_per_estimate": ("limits.newNodesPerEstimate", "PODFIT_LIMITS_NEW_NODES_PER_ESTIMATE"),
    "limits_expansion_options": ("limits.expansionOptions", "PODFIT_LIMITS_EXPANSION_OPTIONS"),
    "limits_pods_per_option": ("limits.podsPerOption", "PODFIT_LIMITS_PODS_PER_OPTION"),
    "limits_template_devices": ("limits.templateDevices", "PODFIT_LIMITS_TEMPLATE_DEVICES"),
    "limits_heavy_calls_waiting": ("limits.heavyCallsWaiting", "PODFIT_LIMITS_HEAVY_CALLS_WAITING"),
    "limits_heavy_call_seconds": ("limits.heavyCallSeconds", "PODFIT_LIMITS_HEAVY_CALL_SECONDS"),
    "feature_gates": ("featureGates", "PODFIT_FEATURE_GATES"),
    "workers": ("workers", "PODFIT_WORKERS"),
    "what_if_process": ("whatIfProcess", "PODFIT_WHAT_IF_PROCESS"),
    "replication_tls_ca_file": ("replication.tlsCAFile", "PODFIT_REPLICATION_TLS_CA_FILE"),
    "replication_tls_cert_file": ("replication.tlsCertFile", "PODFIT_REPLICATION_TLS_CERT_FILE"),
    "replication_tls_key_file": ("replication.tlsKeyFile", "PODFIT_REPLICATION_TLS_KEY_FILE"),
    "replicated_log": ("replication.engine", "PODFIT_REPLICATED_LOG"),
    "replica_addr": ("replication.peerAddr", "PODFIT_REPLICA_ADDR"),
    "replication_key_file": ("replication.keyFile", "PODFIT_REPLICATION_KEY_FILE"),
    "replication_lease_seconds": ("replication.leaseSeconds", "PODFIT_REPLICATION_LEASE_SECONDS"),
    "replication_snapshot_entries": ("replication.snapshotEntries", "PODFIT_REPLICATION_SNAPSHOT_ENTRIES"),
    "replication_election": ("replication.election", "PODFIT_REPLICATION_ELECTION"),
    "replication_lease_namespace": ("replication.leaseNamespace", "PODFIT_REPLICATION_LEASE_NAMESPACE"),
    "replication_lease_name": ("replication.leaseName", "PODFIT_REPLICATION_LEASE_NAME"),
    "replication_kubeconfig": ("replication.kubeconfig", "PODFIT_REPLICATION_KUBECONFIG"),
}
_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}


def _coerce(name: str, value: Any, where: str) -> Any:
    target = {f.name: f for f in fields(Settings)}[name].type
    if target == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower() if isinstance(value, str | int) else ""
        if text in _BOOLEANS:
            return _BOOLEANS[text]
        raise SettingsError(f"{where}: {value!r} must be true or false (or 1 or 0)")
    try:
        if target == "int":
            if isinstance(value, bool):
                raise ValueError
            return int(value)
        if target == "float":
            return float(value)
    except (TypeError, ValueError):
        raise SettingsError(f"{where}: {value!r} is not a number") from None
    if not isinstance(value, str):
        raise SettingsError(f"{where}: must be a string")
    return value


def _lookup(doc: Mapping[str, Any], dotted: str) -> Any:
    node: Any = doc
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


def load_file(path: str) -> tuple[dict[str, Any], Mapping[str, Any] | None]:
    """(PodfitConfiguration settings, KubeSchedulerConfiguration document) from a YAML file."""
    try:
        text = Path(path).read_text()
        documents = [d for d in yaml.safe_load_all(text) if d is not None]
    except OSError as exc:
        raise SettingsError(f"--config: cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}, column {where.column + 1}" if where is not None else ""
        problem = getattr(exc, "problem", None) or "a syntax error"
        raise SettingsError(f"--config: {path} is not valid YAML{at}: {problem}") from None
    values: dict[str, Any] = {}
    scheduler: Mapping[str, Any] | None = None
    for i, doc in enumerate(documents):
        if not isinstance(doc, Mapping):
            raise SettingsError(f"{path}: document {i} must be a mapping")
        kind = doc.get("kind")
        if kind == "KubeSchedulerConfiguration":
            scheduler = doc
        elif kind == "PodfitConfiguration":
            known = {key.split(".")[0] for key, _ in _SOURCES.values()} | {"apiVersion", "kind", "profileVersions"}
            unknown = sorted(set(doc) - known)
            if unknown:
                raise SettingsError(f"{path}: PodfitConfiguration.{unknown[0]}: unknown field")
            for name, (key, _) in _SOURCES.items():
                value = _lookup(doc, key)
                if name == "feature_gates" and isinstance(value, Mapping):
                    # The file may list gates as a mapping, as KubeSchedulerConfiguration tooling does.
                    value = ",".join(f"{gate}={str(flag).lower()}" for gate, flag in value.items())
                if value is not None:
                    values[name] = _coerce(name, value, f"PodfitConfiguration.{key}")
            versions = doc.get("profileVersions")
            if versions is not None:
                if not isinstance(versions, Mapping) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in versions.items()
                ):
                    raise SettingsError("PodfitConfiguration.profileVersions: must map scheduler names to versions")
                values["profile_versions"] = dict(versions)
        else:
            raise SettingsError(
                f"{path}: document {i}: kind must be PodfitConfiguration or KubeSchedulerConfiguration, not {kind!r}"
            )
    return values, scheduler


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="podfit-server",
        description="Serve kube-scheduler-exact Filter/Score/Schedule/Preempt decisions over gRPC.",
    )
    parser.add_argument("--config", help="YAML file: PodfitConfiguration and/or KubeSchedulerConfiguration documents")
    parser.add_argument("--grpc-addr", help="HOST:PORT to serve gRPC on (default 127.0.0.1:50051)")
    parser.add_argument(
        "--extender-addr", help="HOST:PORT for the kube-scheduler extender endpoint, or 'off' (default 127.0.0.1:8888)"
    )
    parser.add_argument("--extender-url-prefix", help="URL prefix of the extender verbs (default /scheduler)")
    parser.add_argument(
        "--extender-bind",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve the extender's bind verb (default: off); a bind is refused unless the pod still fits",
    )
    parser.add_argument(
        "--probe-addr", help="HOST:PORT for plain-HTTP /healthz and /readyz (kubelet probes), or 'off' (default)"
    )
    parser.add_argument(
        "--extender-max-body-bytes", type=int, help="largest extender request body, 413 above it (default 64 MiB)"
    )
    parser.add_argument(
        "--extender-idle-timeout-seconds",
        type=float,
        help="close extender connections idle (or sending headers) this long (default 60)",
    )
    parser.add_argument(
        "--ca-expander-addr", help="HOST:PORT for cluster-autoscaler's gRPC expander (TLS only), or 'off' (default)"
    )
    parser.add_argument(
        "--metrics-addr", help="HOST:PORT to serve Prometheus /metrics on, or 'off' (default 127.0.0.1:9464)"
    )
    parser.add_argument(
        "--ca-expander-unauthenticated",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="serve the CA expander off loopback although it cannot authenticate callers (keep it reachable "
        "only from cluster-autoscaler, e.g. with a NetworkPolicy)",
    )
    parser.add_argument("--max-message-bytes", type=int, help="largest request/response accepted (default 64 MiB)")
    parser.add_argument("--tls-cert-file", help="serve TLS with this PEM certificate chain")
    parser.add_argument("--tls-key-file", help="PEM private key of --tls-cert-file")
    parser.add_argument("--tls-client-ca-file", help="require client certificates signed by this CA (mTLS)")
    parser.add_argument(
        "--auth-token-file", help="require 'authorization: Bearer <token>' with the token in this file (admin role)"
    )
    parser.add_argument(
        "--auth-tokens-file", help="static token file: 'token,role[,name]' lines, role read, write or admin"
    )
    parser.add_argument(
        "--insecure-listen-any",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="allow non-loopback addresses with no caller authentication (no token, no client CA)",
    )
    parser.add_argument("--telemetry-exporter", choices=["none", "console", "otlp"], help="OpenTelemetry exporter")
    parser.add_argument("--log-level", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument(
        "--shutdown-delay-seconds",
        type=float,
        help="on SIGTERM, report NOT_SERVING but keep serving this long before closing the port (default 0)",
    )
    parser.add_argument(
        "--shutdown-grace-seconds",
        type=float,
        help="after the delay, answer the calls already received for at most this long (default 10)",
    )
    parser.add_argument(
        "--kube-scheduler-version",
        help=f"the kube-scheduler version decisions answer as: {', '.join(VERSIONS)} (default {DEFAULT_VERSION})",
    )
    parser.add_argument(
        "--feature-gates",
        help="kube-scheduler feature gates as A=true,B=false; a gate that a version the profiles answer as "
        "does not have, or has locked to the other value, is refused (default: each version's)",
    )
    parser.add_argument(
        "--wait-for-sync",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="refuse decisions and report NOT_SERVING until a feeder calls MarkSynced (default: off)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        help="processes answering decisions: the cache's owner and workers that replicate it (default 0: one per "
        "core, one on 2 cores or fewer)",
    )
    parser.add_argument(
        "--what-if-process",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="answer what-if questions in a process of their own wherever there are 2 cores or more (default: on)",
    )
    parser.add_argument(
        "--replication-tls-ca-file", help="reach the engine over TLS, its certificates signed by this CA"
    )
    parser.add_argument("--replication-tls-cert-file", help="this replica's PEM client certificate for the engine")
    parser.add_argument("--replication-tls-key-file", help="PEM private key of --replication-tls-cert-file")
    parser.add_argument(
        "--replicated-log",
        help="run as one replica of a group on this NATS JetStream engine (comma-separated nats:// URLs; "
        "default: one process, no engine)",
    )
    parser.add_argument("--replica-addr", help="HOST:PORT of this replica's peer listener (replicated log)")
    parser.add_argument("--replication-key-file", help="the group's shared key (replicated log; 16 bytes or more)")
    parser.add_argument("--replication-lease-seconds", type=float, help="the owner's lease (default 5)")
    parser.add_argument("--replication-snapshot-entries", type=int, help="log entries between snapshots (default 1000)")
    parser.add_argument(
        "--replication-election",
        choices=["kubernetes", "engine"],
        help="the owner's lease: a coordination.k8s.io/v1 Lease or a key of the engine's KV (default: a Lease "
        "when running in a cluster or with --replication-kubeconfig, the engine's KV elsewhere)",
    )
    parser.add_argument(
        "--replication-lease-namespace", help="the Lease's namespace (default: the pod's own, else default)"
    )
    parser.add_argument("--replication-lease-name", help="the Lease's name (default podfit-replicas)")
    parser.add_argument(
        "--replication-kubeconfig",
        help="reach the API server for the Lease with this kubeconfig (token and CA) instead of the pod's "
        "service account",
    )
    parser.add_argument("--follow", help=argparse.SUPPRESS)
    parser.add_argument("--what-if", action="store_true", help=argparse.SUPPRESS)
    return parser


def resolve(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> Settings:
    args = build_parser().parse_args(argv)
    environ = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    scheduler = None
    config_path = args.config or environ.get("PODFIT_CONFIG")
    if config_path:
        values, scheduler = load_file(config_path)
    for name, (_, env) in _SOURCES.items():
        if env in environ and environ[env] != "":
            values[name] = _coerce(name, environ[env], env)
    for name in _SOURCES:
        flag = getattr(args, name, None)
        if flag is not None:
            values[name] = flag
    settings = replace(
        Settings(),
        **values,
        scheduler_configuration=scheduler,
        follow_owner=args.follow or "",
        what_if_role=bool(args.what_if),
    )
    validate(settings)
    return settings


def validate(settings: Settings) -> None:
    for name, (key, _) in _SOURCES.items():
        if name.startswith("limits_") and not 1 <= getattr(settings, name) <= 10_000_000:
            raise SettingsError(f"{key}: {getattr(settings, name)} must be between 1 and 10000000")
    try:
        parse_version(settings.kube_scheduler_version, "kubeSchedulerVersion")
    except ValidationError as exc:
        raise SettingsError(str(exc)) from None
    # An unknown gate or a bad value; a locked gate, or one a version lacks, is refused when the profiles
    # are built (app.main), against the versions they answer as, as each kube-scheduler checks its own.
    settings.feature_gate_overrides  # noqa: B018 (raises SettingsError for a bad gate)
    if settings.max_message_bytes < 1024:
        raise SettingsError("maxMessageBytes: must be at least 1024")
    if not 0 <= settings.workers <= 256:
        raise SettingsError(f"workers: {settings.workers} must be between 0 (one per core) and 256")
    if bool(settings.replication_tls_cert_file) != bool(settings.replication_tls_key_file):
        raise SettingsError("replication: tlsCertFile and tlsKeyFile must be set together")
    engine_tls = settings.replication_tls_ca_file or settings.replication_tls_cert_file
    if engine_tls and not settings.replicated_log:
        raise SettingsError("replication.tlsCAFile, .tlsCertFile: only with replication.engine")
    if settings.replicated_log and not (settings.replica_addr and settings.replication_key_file):
        raise SettingsError("replication.engine: needs replication.peerAddr and replication.keyFile")
    if not settings.replication_lease_seconds >= 1:
        raise SettingsError("replication.leaseSeconds: must be at least 1")
    if settings.replication_election not in ("", "kubernetes", "engine"):
        raise SettingsError(
            f"replication.election: {settings.replication_election!r} must be kubernetes or engine (or unset)"
        )
    if settings.replication_kubeconfig and settings.replication_election == "engine":
        raise SettingsError("replication.kubeconfig: only for replication.election kubernetes")
    if not settings.replication_lease_name:
        raise SettingsError("replication.leaseName: must not be empty")
    if settings.extender_max_body_bytes < 1024:
        raise SettingsError("extender.maxBodyBytes: must be at least 1024")
    if not settings.extender_idle_timeout_seconds > 0:
        raise SettingsError("extender.idleTimeoutSeconds: must be greater than 0")
    if bool(settings.tls_cert_file) != bool(settings.tls_key_file):
        raise SettingsError("tls: certFile and keyFile must be set together")
    if settings.tls_client_ca_file and not settings.tls_cert_file:
        raise SettingsError("tls.clientCAFile: needs tls.certFile and tls.keyFile")
    if settings.memo_address:
        host, sep, port = settings.memo_address.rpartition(":")
        if not sep or not host or not port.isdigit():
            raise SettingsError(f"memo.address: {settings.memo_address!r} must be HOST:PORT")
        if settings.memo_backend not in ("redis", "memcached"):
            raise SettingsError("memo.address: only for memo.backend redis or memcached")
    for key, seconds in (
        ("shutdownDelaySeconds", settings.shutdown_delay_seconds),
        ("shutdownGraceSeconds", settings.shutdown_grace_seconds),
    ):
        if not 0 <= seconds <= 3600:
            raise SettingsError(f"{key}: {seconds!r} must be between 0 and 3600 seconds")
    if settings.log_level.upper() not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        raise SettingsError(f"log.level: {settings.log_level!r} must be DEBUG, INFO, WARNING or ERROR")
    if settings.telemetry_exporter not in ("none", "console", "otlp"):
        raise SettingsError(f"telemetry.exporter: {settings.telemetry_exporter!r} must be none, console or otlp")
    if settings.log_format not in ("json", "text"):
        raise SettingsError(f"log.format: {settings.log_format!r} must be json or text")
    host, sep, port = settings.grpc_addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise SettingsError(f"grpcAddr: {settings.grpc_addr!r} must be HOST:PORT")
    for key, addr in (
        ("extender.addr", settings.extender_addr),
        ("caExpander.addr", settings.ca_expander_addr),
        ("probeAddr", settings.probe_addr),
        ("metrics.addr", settings.metrics_addr),
    ):
        _check_optional_addr(key, addr)
    if settings.ca_expander_addr not in ("", "off") and not settings.tls_cert_file:
        raise SettingsError(
            "caExpander.addr: needs tls.certFile and tls.keyFile (cluster-autoscaler only connects over TLS)"
        )
    if not settings.extender_url_prefix.startswith("/"):
        raise SettingsError(f"extender.urlPrefix: {settings.extender_url_prefix!r} must start with /")
    check_exposure(settings)


def _check_optional_addr(key: str, addr: str) -> None:
    """A listener that may be switched off: HOST:PORT (an empty host is every interface) or off."""
    if addr in ("", "off"):
        return
    _, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise SettingsError(f"{key}: {addr!r} must be HOST:PORT or off")


def is_loopback(addr: str) -> bool:
    """Whether HOST:PORT accepts connections from this host only (127.0.0.0/8, ::1, localhost)."""
    host = addr.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name (or the empty wildcard) may resolve to any interface


def check_exposure(settings: Settings) -> None:
    """Refuses a listener reachable from other hosts when nothing authenticates its callers: gRPC needs a
    bearer token or client certificates, the extender client certificates (kube-scheduler sends no
    token). TLS alone authenticates the server, not the caller. insecure_listen_any overrides."""
    expander = settings.ca_expander_addr
    if expander not in ("", "off") and not is_loopback(expander) and not settings.ca_expander_unauthenticated:
        raise SettingsError(
            f"caExpander.addr: {expander} is reachable from other hosts and the expander cannot authenticate "
            "callers (cluster-autoscaler presents no client certificate); set caExpander.unauthenticated "
            "(--ca-expander-unauthenticated) to serve it anyway, or listen on 127.0.0.1"
        )
    tokens_set = bool(settings.auth_token_file or settings.auth_tokens_file)
    if settings.extender_enabled and settings.extender_bind and tokens_set and not settings.tls_client_ca_file:
        raise SettingsError(
            "extender.bind: the bind verb changes the cache, and with auth tokens configured every write must "
            "be authenticated; kube-scheduler sends no token, so set tls.clientCAFile (client certificates) "
            "or turn extender.bind off"
        )
    if settings.insecure_listen_any:
        return
    client_certs = bool(settings.tls_client_ca_file)
    tokens = bool(settings.auth_token_file or settings.auth_tokens_file)
    listeners = [("grpcAddr", settings.grpc_addr, client_certs or tokens)]
    if settings.extender_enabled:
        listeners.append(("extender.addr", settings.extender_addr, client_certs))
    for key, addr, authenticated in listeners:
        if not authenticated and not is_loopback(addr):
            needs = "tls.clientCAFile or an auth token file" if key == "grpcAddr" else "tls.clientCAFile"
            raise SettingsError(
                f"{key}: {addr} is reachable from other hosts but nothing authenticates callers; "
                f"set {needs}, listen on 127.0.0.1, or pass --insecure-listen-any"
            )
