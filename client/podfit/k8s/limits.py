"""Bounds on untrusted input, checked once at the edge (gRPC ``kubernetes_json`` and the extender's bodies).

Python's JSON decoders and protobuf's json_format recurse; a body nested thousands deep (``[[[[...``)
ends in RecursionError far from the edge, and a lone UTF-16 surrogate (``"\\ud800"``) decodes to a str that
nothing can encode again. Both are refused here, before any decoding, with the field they came in.
Every value echoed back in an error is cut with :func:`echo`, and every error text made valid UTF-8
with :func:`clean`, so no answer outgrows gRPC's 16 KiB trailing metadata or fails to encode.
"""

from __future__ import annotations

import re

from podfit.k8s.errors import ConversionError

# Kubernetes objects nest ~20 deep (managedFields' fieldsV1 mirrors the object); far below recursion limits.
MAX_JSON_DEPTH = 100
# What an echoed value keeps; the rest is summarised as its size.
ECHO_CHARS = 200
# A whole error message; several echoed values and a field path fit comfortably.
MESSAGE_CHARS = 1024

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')
# A \uD800-\uDFFF escape anywhere: rare in real objects, so only then is the exact (slower) check run.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


class UntrustedInputError(ConversionError):
    """Input refused before decoding; ``field`` is where it came in (relative to the caller's path)."""


def json_depth(raw: bytes) -> int:
    """How deep arrays and objects nest in ``raw`` (brackets inside strings do not count).

    Vectorised: a 650 KB extender body takes a few milliseconds, a scan in Python thirty. numpy is imported
    here, not with the module: the CLI loads this module at every start and rarely checks a body."""
    import numpy as np

    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    marks = np.frombuffer(unescaped.translate(None, _NOT_STRUCTURE), np.uint8)
    if not marks.size:
        return 0
    outside = (np.cumsum(marks == ord('"')) & 1) == 0
    opens = ((marks == ord("[")) | (marks == ord("{"))) & outside
    closes = ((marks == ord("]")) | (marks == ord("}"))) & outside
    return max(0, int(np.cumsum(opens.astype(np.int32) - closes).max()))


def has_lone_surrogate(raw: bytes) -> bool:
    """Whether a JSON string escapes half of a UTF-16 surrogate pair (which no UTF-8 text can hold)."""
    if _SURROGATE_ESCAPE.search(raw) is None:
        return False
    import json

    try:
        decoded = json.loads(raw)
    except (ValueError, RecursionError):
        return False  # the decoder reports it
    stack = [decoded]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if not _encodes(value):
                return True
        elif isinstance(value, dict):
            if not all(_encodes(key) for key in value):
                return True
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_json(raw: bytes, field: str = "", *, max_depth: int = MAX_JSON_DEPTH) -> None:
    """Refuses JSON nested deeper than ``max_depth`` or holding a lone surrogate, before it is decoded."""
    # Most objects hold fewer brackets than the limit, and then cannot nest deeper: no scan needed.
    depth = 0 if raw.count(b"[") + raw.count(b"{") <= max_depth else json_depth(raw)
    if depth > max_depth:
        raise UntrustedInputError(field, f"nests {depth} levels deep; at most {max_depth} are accepted")
    if has_lone_surrogate(raw):
        raise UntrustedInputError(field, "holds an unpaired UTF-16 surrogate escape (\\ud800-\\udfff)")


def clean(text: str) -> str:
    """``text`` as valid UTF-8 (lone surrogates written as \\udXXX escapes)."""
    if _encodes(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def echo(value: object, limit: int = ECHO_CHARS) -> str:
    """A value as quoted in an error (its repr), cut to ``limit`` characters plus the value's full size."""
    quoted = repr(value)
    if len(quoted) <= limit:
        return clean(quoted)
    text = value if isinstance(value, str) else quoted
    return clean(quoted[:limit]) + f"… ({len(text.encode('utf-8', 'surrogatepass'))} bytes)"


def bounded(text: str, limit: int = MESSAGE_CHARS) -> str:
    """An error text fit to send: valid UTF-8 and at most ``limit`` characters (plus its full size)."""
    if len(text) <= limit:
        return clean(text)
    size = len(text.encode("utf-8", "surrogatepass"))
    return clean(text[:limit]) + f"… ({size} bytes)"
