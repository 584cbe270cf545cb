"""``podfit feed``: keeps a podfit cache current from a Kubernetes API server (list, watch, resync), as an
informer would. ``Feeder`` is the library; ``podfit.feed.command`` is the CLI around it."""

from podfit.feed.feeder import Backoff, Feeder, Resync
from podfit.feed.kinds import ALL_KINDS, POD_FIELD_SELECTOR, KindSpec, Scope, select_kinds
from podfit.feed.metrics import FeederMetrics, FeederStats

__all__ = [
    "ALL_KINDS",
    "POD_FIELD_SELECTOR",
    "Backoff",
    "Feeder",
    "FeederMetrics",
    "FeederStats",
    "KindSpec",
    "Resync",
    "Scope",
    "select_kinds",
]
