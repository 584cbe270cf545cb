"""The "why pending" line: kube-scheduler's ``FitError.Error()``, as its FailedScheduling event shows it.

Operators grep for this text and dashboards parse it, so it is reproduced byte for byte
(v1.35.4, ``framework/types.go`` and ``schedule_one.go``):

* ``0/N nodes are available:``, then either the PreFilter rejection's message (when PreFilter rejected
  the pod, every node carries that one status, so no histogram is built), or a histogram of every
  rejected node's reasons, ``"<count> <reason>"`` sorted as strings (so ``10 x`` sorts before ``2 y``)
  and joined with ``, ``; nodes that no Filter ran on (a PreFilter result narrowed the candidates) count
  with the framework's "absent nodes" status. Each part ends with ``.``.
* The PostFilter status message (all rejecting PostFilter plugins' reasons, joined with ``, ``) follows
  after one space and no added period: it carries its own (``... not helpful for scheduling.``).
* A cluster without nodes fails before filtering with ``no nodes available to schedule pods``.
* The event text is cut to the event API's 1,024-byte note limit, ending in `` ...``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np
from podfit.server.framework.runtime import FilterOutcome

NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"
NO_NODES_AVAILABLE = "no nodes available to schedule pods"
# k8s.io/kubernetes/pkg/apis/core/validation NoteLengthLimit, applied by handleSchedulingFailure.
EVENT_MESSAGE_LIMIT = 1024
_TRUNCATED = " ..."


def fit_error(
    num_nodes: int, reasons: Mapping[str, int], pre_filter_message: str = "", post_filter_message: str = ""
) -> str:
    """``FitError.Error()`` from its parts: a PreFilter message, or per-reason node counts."""
    message = NO_NODE_AVAILABLE_MSG.format(num_nodes) + ":"
    if pre_filter_message:
        message += f" {pre_filter_message}."
    else:
        histogram = sorted(f"{count} {reason}" for reason, count in reasons.items())
        if histogram:
            message += f" {', '.join(histogram)}."
    if post_filter_message:
        message += f" {post_filter_message}"
    return message


def reason_counts(outcome: FilterOutcome) -> Counter[str]:
    """How many candidate nodes each rejection reason was given for (columnar: one count per status)."""
    counts: Counter[str] = Counter()
    per_status = np.bincount(outcome.codes[outcome.codes > 0], minlength=len(outcome.status_table) + 1)
    for status, count in zip(outcome.status_table, per_status[1:].tolist(), strict=True):
        if count:
            for reason in status.reasons:
                counts[reason] += count
    return counts


def outcome_fit_error(outcome: FilterOutcome, post_filter_message: str = "") -> str:
    """The FailedScheduling event message for a pod no candidate node fits ("" when some node fits)."""
    if not len(outcome):
        return NO_NODES_AVAILABLE
    if len(outcome.feasible_index):
        return ""
    pre_filter = outcome.pre_filter_status
    if pre_filter is not None:
        message = fit_error(len(outcome), {}, pre_filter.message, post_filter_message)
    else:
        message = fit_error(len(outcome), reason_counts(outcome), "", post_filter_message)
    return event_message(message)


def event_message(message: str) -> str:
    """``truncateMessage``: at most 1,024 bytes, the cut marked with `` ...``."""
    data = message.encode()
    if len(data) <= EVENT_MESSAGE_LIMIT:
        return message
    # Upstream cuts bytes; a cut inside a UTF-8 sequence drops the partial character (strings must stay valid).
    return data[: EVENT_MESSAGE_LIMIT - len(_TRUNCATED)].decode(errors="ignore") + _TRUNCATED
