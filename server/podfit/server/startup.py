"""Checks made before podfit-server listens, so a bad start is one clear line on stderr, never a traceback.

gRPC's C core reports a busy port or a bad certificate as "Failed to bind to address" (plus its own log
lines), whatever the cause; Python's socket and ssl modules say what is wrong, so podfit asks them first
and names the setting to change. A race (the port taken between this check and the bind) still fails
cleanly, with the less precise message.
"""

from __future__ import annotations

import importlib.util
import socket
import ssl

from podfit.server.settings import Settings, SettingsError

# (setting, its key in messages, the flag that changes it)
_LISTENERS = (
    ("grpc_addr", "grpcAddr", "--grpc-addr"),
    ("extender_addr", "extender.addr", "--extender-addr"),
    ("metrics_addr", "metrics.addr", "--metrics-addr"),
    ("ca_expander_addr", "caExpander.addr", "--ca-expander-addr"),
    ("probe_addr", "probeAddr", "--probe-addr"),
)


def preflight(settings: Settings) -> None:
    """Raises SettingsError naming the first setting podfit-server could not start with."""
    check_tls_files(settings)
    if settings.telemetry_exporter == "otlp" and importlib.util.find_spec("opentelemetry.exporter.otlp") is None:
        raise SettingsError("telemetry.exporter: 'otlp' needs the 'otlp' extra (pip install 'podfit[otlp]')")
    if settings.memo_backend not in ("memory", "redis", "memcached"):
        raise SettingsError(f"memo.backend: {settings.memo_backend!r} must be memory, redis or memcached")
    if settings.follow_owner:
        return  # a decision worker listens beside its owner, on the ports the owner already holds
    seen: set[str] = set()
    busy: list[str] = []
    for name, key, flag in _LISTENERS:
        addr = getattr(settings, name)
        if addr in ("", "off") or addr in seen:
            continue
        seen.add(addr)
        try:
            check_listen(key, addr, flag)
        except SettingsError as exc:
            busy.append(str(exc))
    # Every listener that cannot open, in one message: fixing them one start at a time is tedious.
    if len(busy) == 1:
        raise SettingsError(busy[0])
    if busy:
        raise SettingsError(f"{len(busy)} listeners cannot open: " + "; ".join(busy))


def listen_error(key: str, addr: str, flag: str, reason: str = "") -> SettingsError:
    why = f": {reason}" if reason else ""
    return SettingsError(
        f"{key}: cannot listen on {addr}{why} (another process, perhaps another podfit-server, may hold the port; "
        f"pick another with {flag} HOST:PORT)"
    )


def check_listen(key: str, addr: str, flag: str) -> None:
    """Binds ``addr`` once and lets go, to learn whether (and why not) it can be listened on."""
    host, _, port_text = addr.rpartition(":")
    host = host.strip("[]") or "0.0.0.0"
    port = int(port_text)
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise SettingsError(f"{key}: cannot resolve the host of {addr}: {exc.strerror}") from None
    for family, kind, proto, _, sockaddr in infos[:1]:
        with socket.socket(family, kind, proto) as probe:
            # As the servers bind: TIME_WAIT connections of a previous run do not make the port busy.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as exc:
                raise listen_error(key, addr, flag, exc.strerror or str(exc)) from None


def check_tls_files(settings: Settings) -> None:
    """Reads the TLS files and parses them as the listeners will, naming the file at fault."""
    for path, key in (
        (settings.tls_cert_file, "tls.certFile"),
        (settings.tls_key_file, "tls.keyFile"),
        (settings.tls_client_ca_file, "tls.clientCAFile"),
    ):
        if path:
            try:
                with open(path, "rb"):
                    pass
            except OSError as exc:
                raise SettingsError(f"{key}: cannot read {path}: {exc.strerror}") from None
    if settings.tls_cert_file:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            # No password prompt: an encrypted key is refused, not asked about on a terminal.
            context.load_cert_chain(settings.tls_cert_file, settings.tls_key_file, password=lambda: b"")
        except ssl.SSLError as exc:
            raise SettingsError(
                f"tls.certFile/tls.keyFile: {settings.tls_cert_file} and {settings.tls_key_file} are not a PEM "
                f"certificate chain and its private key ({exc.reason or exc}); check the files are PEM, "
                "the key is not encrypted, and it belongs to the certificate"
            ) from None
    if settings.tls_client_ca_file:
        try:
            ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_verify_locations(settings.tls_client_ca_file)
        except ssl.SSLError as exc:
            raise SettingsError(
                f"tls.clientCAFile: {settings.tls_client_ca_file} holds no PEM CA certificate ({exc.reason or exc})"
            ) from None
