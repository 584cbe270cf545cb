"""Bearer tokens with roles, checked once per call by a server interceptor (transport only).

The token file follows kube-apiserver's static token file (``--token-auth-file``): one ``token,role[,name]``
line per token, ``#`` comments and blank lines ignored. Roles nest: read < write < admin.

- read: decisions that change nothing (Filter, Score, Schedule and ScheduleStream without assume,
  Preempt, Simulate, EstimateScaleUp, SimulateDrain) and reading the cache (Get, List, Stats);
- write: read, plus changing the cache (Apply, Replace, Stream, MarkSynced) and any assume
  (Schedule/ScheduleStream with ``assume``, ScheduleBatch, which always assumes);
- admin: write, plus server reflection and every method this table does not name, so an RPC added
  later is closed to read and write tokens until someone decides its role.

The legacy ``auth.tokenFile`` (one token, full access) is an admin token. gRPC health stays open: probes
carry no token. Tokens are never logged or echoed; the name is what errors and logs show.
"""

from __future__ import annotations

import enum
import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from podfit.server.settings import Settings, SettingsError

log = logging.getLogger("podfit.server.auth")

OPEN_METHODS = ("/grpc.health.v1.Health/",)
# A refused (token name, method) is logged at most once per this many seconds: a misconfigured client
# retrying in a loop must not flood the log.
DENIAL_LOG_INTERVAL = 60.0


class _DenialLog:
    """Logs a refusal by token name and method, each pair at most once per DENIAL_LOG_INTERVAL."""

    def __init__(self) -> None:
        self._last: dict[tuple[str, str], float] = {}

    def __call__(self, method: str, who: Identity) -> None:
        now = time.monotonic()
        key = (who.name, method)
        if now - self._last.get(key, -DENIAL_LOG_INTERVAL) < DENIAL_LOG_INTERVAL:
            return
        if len(self._last) > 10_000:
            self._last.clear()
        self._last[key] = now
        extra = {"method": method, "token_name": who.name}
        log.warning("permission denied: %s with a %s token", method, who.role.label, extra=extra)


class Role(enum.IntEnum):
    READ = 1
    WRITE = 2
    ADMIN = 3

    @property
    def label(self) -> str:
        return self.name.lower()


@dataclass(frozen=True)
class Identity:
    name: str
    role: Role


class TokenFileError(SettingsError):
    """A token file podfit-server refuses to start with; the message never holds a token."""


_CACHE = "/podfit.v1.ClusterCache/"
_SCHEDULER = "/podfit.v1.Scheduler/"
_SIMULATION = "/podfit.v1.Simulation/"
# The role each method needs; methods not named here need admin.
METHOD_ROLES: dict[str, Role] = {
    **{_CACHE + m: Role.READ for m in ("Get", "List", "Stats")},
    **{_CACHE + m: Role.WRITE for m in ("Apply", "Replace", "Stream", "MarkSynced")},
    **{_SCHEDULER + m: Role.READ for m in ("Filter", "Score", "Schedule", "ScheduleStream", "Preempt")},
    _SCHEDULER + "ScheduleBatch": Role.WRITE,
    **{_SIMULATION + m: Role.READ for m in ("Simulate", "EstimateScaleUp", "SimulateDrain")},
}
# Methods whose requests may ask for an assume (ScheduleRequest.assume): that request needs write.
ASSUMING_METHODS = frozenset({_SCHEDULER + "Schedule", _SCHEDULER + "ScheduleStream"})


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def load_tokens_file(path: str) -> dict[bytes, Identity]:
    """``token,role[,name]`` lines -> {sha256(token): identity}."""
    where = "auth.tokensFile"
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError(f"{where}: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    table: dict[bytes, Identity] = {}
    for number, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [p.strip() for p in line.split(",")]
        if len(parts) not in (2, 3):
            raise TokenFileError(f"{where}: line {number}: must be token,role[,name]")
        token, role_text = parts[0], parts[1].lower()
        if not token or any(c.isspace() for c in token):
            raise TokenFileError(f"{where}: line {number}: the token must be non-empty, without spaces")
        if role_text not in ("read", "write", "admin"):
            raise TokenFileError(f"{where}: line {number}: role {parts[1][:20]!r} must be read, write or admin")
        name = parts[2] if len(parts) == 3 and parts[2] else f"line-{number}"
        key = _digest(token)
        if key in table:
            raise TokenFileError(f"{where}: line {number}: the same token as {table[key].name!r}")
        table[key] = Identity(name, Role[role_text.upper()])
    if not table:
        raise TokenFileError(f"{where}: {path} holds no tokens")
    return table


def load_single_token(path: str) -> dict[bytes, Identity]:
    """The legacy one-token file: the whole file (stripped) is an admin token."""
    try:
        token = Path(path).read_bytes().decode().strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError(f"auth.tokenFile: cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    if not token:
        raise TokenFileError("auth.tokenFile: the file is empty")
    return {_digest(token): Identity("auth.tokenFile", Role.ADMIN)}


def _denied(code: grpc.StatusCode, message: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    """A handler that refuses the call without reading its request."""

    async def deny(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(code, message)

    async def deny_stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
        await context.abort(code, message)
        yield  # pragma: no cover

    if handler.request_streaming or handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(deny_stream)
    return grpc.unary_unary_rpc_method_handler(deny)


def _assume_checked(
    handler: grpc.RpcMethodHandler, method: str, who: Identity, log_denial: _DenialLog
) -> grpc.RpcMethodHandler:
    """``handler`` with every request that asks for an assume refused (PERMISSION_DENIED): the role
    check needs the request, so it runs after decoding, before the servicer sees the request."""
    message = f"{method.rsplit('/', 1)[1]} with assume needs the write role; token {who.name!r} has {who.role.label}"

    async def check(request: Any, context: grpc.aio.ServicerContext) -> None:
        if getattr(request, "assume", False):
            log_denial(method, who)
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, message)

    if handler.unary_unary is not None:
        inner = handler.unary_unary

        async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await check(request, context)
            return await inner(request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )
    inner_stream = handler.stream_stream

    async def stream(requests: AsyncIterator[Any], context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
        async def checked() -> AsyncIterator[Any]:
            async for request in requests:
                await check(request, context)
                yield request

        async for response in inner_stream(checked(), context):
            yield response

    return grpc.stream_stream_rpc_method_handler(
        stream, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
    )


class RoleAuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Requires 'authorization: Bearer <token>' on every call but health checks: an unknown or missing
    token is UNAUTHENTICATED, a known token without the method's role PERMISSION_DENIED naming the role."""

    def __init__(self, tokens: dict[bytes, Identity]) -> None:
        self._tokens = dict(tokens)
        self._log_denial = _DenialLog()

    def identify(self, metadata: Any) -> Identity | None:
        """The caller's identity; None for no token, an unknown one, or two authorization headers (which
        one a proxy forwards is not for podfit to guess). The scheme is case-insensitive (RFC 6750)."""
        supplied = [
            value if isinstance(value, str) else value.decode(errors="replace")
            for key, value in metadata or ()
            if key == "authorization"
        ]
        if len(supplied) != 1:
            return None
        scheme, _, token = supplied[0].partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self._tokens.get(_digest(token.strip()))

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method = details.method
        if method.startswith(OPEN_METHODS):
            return await continuation(details)
        handler = await continuation(details)
        if handler is None:
            return None
        who = self.identify(details.invocation_metadata)
        if who is None:
            return _denied(grpc.StatusCode.UNAUTHENTICATED, "missing or invalid bearer token", handler)
        needed = METHOD_ROLES.get(method, Role.ADMIN)
        if who.role < needed:
            self._log_denial(method, who)
            short = method.rsplit("/", 1)[-1] or method
            return _denied(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{short} needs the {needed.label} role; token {who.name!r} has {who.role.label}",
                handler,
            )
        if who.role < Role.WRITE and method in ASSUMING_METHODS:
            return _assume_checked(handler, method, who, self._log_denial)
        return handler


def load_tokens(settings: Settings) -> dict[bytes, Identity]:
    """Every configured token: the static token file's and the legacy single admin token."""
    tokens: dict[bytes, Identity] = {}
    if settings.auth_tokens_file:
        tokens.update(load_tokens_file(settings.auth_tokens_file))
    if settings.auth_token_file:
        tokens.update(load_single_token(settings.auth_token_file))
    return tokens
