"""ClusterCache.List in pages, as Kubernetes pages a list with ``limit`` and ``continue``.

A page ends at ``limit`` objects or before it outgrows PAGE_BYTES, whichever comes first, so no List
answer can exceed a client's default 4 MiB receive limit (one List of a big cluster was RESOURCE_EXHAUSTED).
The continue token is opaque to clients: it names the listing it belongs to (kind, namespace, selector,
pod filter), the server epoch that issued it, and the last key returned; the next page starts after that
key in (namespace, name) order, read from the cache as it is then. The cache keeps no old versions to
page through (etcd does, for a while), so a token outlives changes but not a restart: a new epoch means
the cache it paged through is gone, answered FAILED_PRECONDITION as Kubernetes answers 410 Expired.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import hashlib
import json
from collections.abc import Sequence

from podfit.server.cache.cluster_cache import Entry
from podfit.server.model import ValidationError
from podfit.server.transport.errors import ExpiredError
from podfit.v1 import cluster_cache_pb2 as cc

# Serialized bytes of objects in one page: under gRPC's default 4 MiB receive limit with room to spare.
PAGE_BYTES = 3 * 1024 * 1024
_VERSION = 1


def listing_of(request: cc.ListRequest) -> str:
    """What a token is bound to: every field of the request but limit and the token itself."""
    spelled = json.dumps(
        [request.kind, request.namespace, request.label_selector, request.pod_filter, request.field_selector]
    )
    return hashlib.blake2b(spelled.encode("utf-8", "surrogatepass"), digest_size=12).hexdigest()


def key_of(entry: Entry) -> tuple[str, str]:
    return getattr(entry.obj, "namespace", ""), entry.obj.name


def token(listing: str, epoch: str, last: tuple[str, str]) -> str:
    data = json.dumps({"v": _VERSION, "l": listing, "e": epoch, "k": list(last)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(data.encode()).decode().rstrip("=")


def position(continue_token: str, listing: str, epoch: str) -> tuple[str, str] | None:
    """The key the requested page starts after (None: the first page)."""
    if not continue_token:
        return None
    try:
        padded = continue_token + "=" * (-len(continue_token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))
        version, bound_to, issued_by, last = data["v"], data["l"], data["e"], data["k"]
        namespace, name = last
        if version != _VERSION or not all(isinstance(v, str) for v in (bound_to, issued_by, namespace, name)):
            raise ValueError
    except (ValueError, TypeError, KeyError, UnicodeError, binascii.Error):
        raise ValidationError("continue_token", "is not a continue token this server issued") from None
    if issued_by != epoch:
        raise ExpiredError(
            "continue_token",
            "continue token expired: it was issued before this server restarted, and the cache it paged "
            "through is gone; list again from the start (without continue_token)",
        )
    if bound_to != listing:
        raise ValidationError(
            "continue_token",
            "was issued for a different listing: kind, namespace, label_selector, field_selector and pod_filter "
            "must stay the same",
        )
    return namespace, name


def page(entries: Sequence[Entry], after: tuple[str, str] | None, limit: int) -> tuple[list[Entry], int]:
    """(the page's entries, how many matching entries follow it)."""
    ordered = sorted(entries, key=key_of)
    # The first key past the token's (whether or not that object still exists).
    start = 0 if after is None else bisect.bisect_right(ordered, after, key=key_of)
    end, size = start, 0
    stop = len(ordered) if limit <= 0 else min(len(ordered), start + limit)
    while end < stop:
        size += len(ordered[end].source) + 8  # the field's tag and length prefix
        if size > PAGE_BYTES and end > start:
            break
        end += 1
    return list(ordered[start:end]), len(ordered) - end
