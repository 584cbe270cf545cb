"""Plugin verdicts as data, mirroring kube-scheduler's framework.Status.

Plugins return ``None`` for success (the common, allocation-free case) or a Status.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace


class Code(enum.Enum):
    SUCCESS = "Success"
    ERROR = "Error"
    UNSCHEDULABLE = "Unschedulable"
    UNSCHEDULABLE_AND_UNRESOLVABLE = "UnschedulableAndUnresolvable"
    SKIP = "Skip"


@dataclass(frozen=True, slots=True)
class Status:
    code: Code
    reasons: tuple[str, ...] = ()
    # The plugin that produced the status; the runtime fills it in.
    plugin: str = ""

    @property
    def rejected(self) -> bool:
        return self.code in (Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)

    @property
    def message(self) -> str:
        return ", ".join(self.reasons)

    def with_plugin(self, plugin: str) -> Status:
        return self if self.plugin == plugin else replace(self, plugin=plugin)


SUCCESS = Status(Code.SUCCESS)
SKIP = Status(Code.SKIP)


def unschedulable(*reasons: str) -> Status:
    """Rejected, but evicting pods from the node might help."""
    return Status(Code.UNSCHEDULABLE, reasons)


def unresolvable(*reasons: str) -> Status:
    """Rejected in a way that preemption cannot change."""
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, reasons)


def error(*reasons: str) -> Status:
    return Status(Code.ERROR, reasons)


class PluginError(Exception):
    """A plugin's internal error (upstream: a Status of code Error): it aborts the scheduling attempt."""


class FrameworkError(Exception):
    """An aborted scheduling attempt, worded as kube-scheduler reports it (the plugin and phase named)."""
