"""Placing a run of identical pods from one decision, as kube-scheduler would decide them one by one.

A ReplicaSet's burst asks the same question again and again: each replica is decided over the cache the
previous one was assumed into, which differs from the last decision's only on the row that replica took.
When every plugin answering for the pod reads nothing but its row (``row_local``) or is unchanged by more
copies of the pod (``replica_invariant``), the next replicas' nodes follow from the first decision's totals:
replica j goes to the j-th best row (total, then name), unless a row already given a replica now ranks at or
above it. Those rows' new totals are the only thing to compute, and they are computed together, on copies of
their NodeInfos in a scratch table, by the same plugins over rows. The plan stops before the first replica
it cannot show would be placed the same way, so what it answers is what the cycle answers pod by pod
(``tests/test_replica_plan.py`` compares the two over generated clusters).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from podfit.server.framework.cycle_state import CycleState
from podfit.server.framework.runtime import FilterOutcome, Framework, ScoreTable
from podfit.server.model import Pod

if TYPE_CHECKING:
    from podfit.server.cache.snapshot import Snapshot


@dataclass(frozen=True, slots=True)
class Placement:
    """Where one planned replica goes, and how many nodes tie there in its decision."""

    node_name: str
    best_count: int


@dataclass(slots=True)
class ReplicaPlan:
    """The replicas after a decided pod: their placements in order, with what every one of their decisions
    shares (the candidates, the feasible nodes, and the CycleState Reserve reads)."""

    state: CycleState
    candidate_count: int
    feasible_count: int
    placements: deque[Placement] = field(default_factory=deque)


@dataclass(frozen=True, slots=True)
class Replicas:
    """A decision that selected a node (its ``outcome`` and ``scores``), kept to plan the pod's replicas
    from when they come: planning costs a re-score of the rows it ranks, so it is done only once a replica
    has arrived."""

    framework: Framework
    state: CycleState
    pod: Pod
    outcome: FilterOutcome
    scores: ScoreTable

    def plan(self, count: int, snapshot: Snapshot) -> ReplicaPlan | None:
        """Up to ``count`` replicas placed after the pod decided, over ``snapshot``: the cache the decision
        was made on plus, at most, the decided pod reserved on its node (the caller vouches that nothing
        else changed); None when the profile cannot plan for this pod."""
        totals = self.scores.totals
        feasible = len(totals)
        if count <= 0 or feasible < 2 or not self.framework.plans_replicas(self.state, self.pod, snapshot):
            return None
        ranked = min(count + 1, feasible)
        # Best first: the highest total, then the first by name (the feasible rows are in name order).
        key = (int(totals.max()) - totals) * feasible + np.arange(feasible, dtype=np.int64)
        top = np.argpartition(key, ranked - 1)[:ranked] if ranked < feasible else np.arange(feasible)
        top = top[np.argsort(key[top], kind="stable")]
        after, fits = self._totals_with_one_more(snapshot, top[:-1])
        plan = ReplicaPlan(self.state, len(self.outcome), feasible)
        names = self.scores.names
        ranked_totals = totals[top].tolist()
        after_totals = after.tolist()
        positions = top.tolist()
        # The best of the rows already given a replica (total after it, position): it must rank below the next.
        best_total, best_position = -1, -1
        given: dict[int, int] = {}  # original total -> rows given a replica
        moved: dict[int, int] = {}  # total after a replica -> rows given one
        ties: dict[int, int] = {}
        for j in range(1, ranked):
            previous = j - 1
            if not fits[previous]:
                # A row the replica filled drops out of the feasible nodes: normalisation may see other nodes.
                break
            total_after, position = after_totals[previous], positions[previous]
            if total_after > best_total or (total_after == best_total and position < best_position):
                best_total, best_position = total_after, position
            given[ranked_totals[previous]] = given.get(ranked_totals[previous], 0) + 1
            moved[total_after] = moved.get(total_after, 0) + 1
            total, position = ranked_totals[j], positions[j]
            if best_total > total or (best_total == total and best_position < position):
                break
            tied = ties.get(total)
            if tied is None:
                tied = ties[total] = int(np.count_nonzero(totals == total))
            best_count = tied - given.get(total, 0) + moved.get(total, 0)
            plan.placements.append(Placement(str(names[position]), best_count))
        return plan if plan.placements else None

    def _totals_with_one_more(self, snapshot: Snapshot, given: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the feasible nodes at ``given`` (indexes into the feasible ones): the total the next replica
        would score there once one replica more is on it, and whether it would still fit. A node holding the
        decided pod already (once reserved) is that node as it is: adding a pod replaces one of its name.

        Row-local plugins answer on copies of the rows with the pod added; every other plugin's answer is
        unchanged (``Framework.plans_replicas`` holds them to that), as are the normalising plugins' (their
        raw scores read only the Node, and no feasible node leaves the set the plan relies on)."""
        framework, state, pod = self.framework, self.state, self.pod
        table = snapshot.table
        scratch = table.scratch()
        rows = []
        for row in self.outcome.feasible_rows[given].tolist():
            info = table.infos[row]
            assert info is not None
            copy = info.clone()
            copy.add_pod(pod)
            rows.append(scratch.add(copy))
        scratch_rows = np.array(rows, dtype=np.intp)
        codes = np.zeros(len(scratch_rows), dtype=np.int32)
        framework.run_filter(state, pod, scratch, scratch_rows, codes, [], framework.row_local_filters)
        after = np.zeros(len(scratch_rows), dtype=np.int64)
        for weighted in framework.profile.score:
            name = weighted.plugin.name
            if name in state.skip_score:
                continue
            if framework.rescored_per_row(name):
                after += weighted.plugin.score_rows(state, pod, scratch, scratch_rows) * weighted.weight
            else:
                after += self.scores.plugins[name][given]
        return after, codes == 0
