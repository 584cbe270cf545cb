"""The one error of turning untrusted Kubernetes input into podfit's messages, shared by every converter
(JSON, Kubernetes protobuf, the edge's bounds) so that callers catch one type and read one field path."""

from __future__ import annotations


class ConversionError(ValueError):
    """A manifest that cannot become a podfit.v1 message; ``field`` locates the problem."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.message = message
