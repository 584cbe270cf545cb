"""Per-decision scratch space shared by a plugin's extension points (kube-scheduler's CycleState)."""

from __future__ import annotations

from typing import Any, Protocol, TypeVar, cast

T = TypeVar("T")


class StateData(Protocol):
    """What plugins store: copied by ``clone`` so that preemption can simulate on its own copy."""

    def clone(self) -> StateData: ...


class CycleState:
    __slots__ = ("_data", "skip_filter", "skip_score")

    def __init__(self) -> None:
        self._data: dict[str, Any] = {}
        # Plugins whose PreFilter / PreScore returned Skip for this pod.
        self.skip_filter: set[str] = set()
        self.skip_score: set[str] = set()

    def write(self, key: str, value: Any) -> None:
        self._data[key] = value

    def read(self, key: str, kind: type[T]) -> T:
        """The value a plugin wrote; KeyError if its PreFilter/PreScore did not run."""
        return cast(T, self._data[key])

    def get(self, key: str) -> Any:
        return self._data.get(key)

    def clone(self) -> CycleState:
        copy = CycleState()
        copy._data = {k: (v.clone() if hasattr(v, "clone") else v) for k, v in self._data.items()}
        copy.skip_filter = set(self.skip_filter)
        copy.skip_score = set(self.skip_score)
        return copy
