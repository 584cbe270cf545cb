"""What to do about a server the CLI cannot reach, in one line.

gRPC reports a plaintext client meeting a TLS server as "Socket closed" and the reverse as a TLS
handshake failure deep in its message; the user needs the flag to change. Only when the call failed as
UNAVAILABLE does the CLI look closer: a TLS handshake of its own (certificate not checked, nothing sent)
tells whether the server speaks TLS.
"""

from __future__ import annotations

import socket
import ssl

import grpc
from podfit.client._requests import ChannelConfig
from podfit.client.errors import PodfitError

TLS_SERVER = "the server speaks TLS; pass --ca-file CA.pem (or --tls when its certificate is publicly trusted)"
PLAINTEXT_SERVER = "the server speaks plaintext; drop --tls and --ca-file"
WRONG_NAME = (
    "the server's certificate does not name the host in --target; connect by a name it holds (e.g. localhost:PORT)"
)
NOTHING_LISTENS = "nothing listens there; is podfit-server running, and is --target HOST:PORT right?"


def _host_port(target: str) -> tuple[str, int] | None:
    target = target.removeprefix("dns:///").removeprefix("ipv4:").removeprefix("ipv6:")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit():
        return None
    return host.strip("[]") or "localhost", int(port)


def speaks_tls(target: str, timeout: float = 2.0) -> bool:
    """Whether ``target`` completes a TLS handshake (its certificate is not checked: only the protocol)."""
    address = _host_port(target)
    if address is None:
        return False
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2"])
    try:
        with (
            socket.create_connection(address, timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=address[0]),
        ):
            return True
    except (OSError, ssl.SSLError, ValueError):
        return False


def connection_hint(error: PodfitError, config: ChannelConfig) -> str:
    """A hint for an UNAVAILABLE error, "" when there is nothing better to say than gRPC's message."""
    if error.code is not grpc.StatusCode.UNAVAILABLE:
        return ""
    message = error.message
    if "Hostname Verification" in message:
        return WRONG_NAME
    if config.tls and ("WRONG_VERSION_NUMBER" in message or "Tls handshake failed" in message):
        return PLAINTEXT_SERVER if not speaks_tls(config.target) else ""
    if "Connection refused" in message:
        return NOTHING_LISTENS
    if not config.tls and speaks_tls(config.target):
        return TLS_SERVER
    return ""
