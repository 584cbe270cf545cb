"""Input errors that carry the offending field path, mapped to INVALID_ARGUMENT / HTTP 400."""

from __future__ import annotations


class ValidationError(ValueError):
    """Bad input: ``field`` is a dotted path such as ``pod.spec.containers[0].resources.requests.cpu``."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message
