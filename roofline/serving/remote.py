"""Remote KV loads on a disaggregated decode engine (serving.disagg's two hops; the state serving.scheduler.Scheduler
keeps for them, serving.kernel_remote its compiled twin): the requests whose load was posted and not yet acted on, in
the order they were posted, each one's completion (post + transfer) and when its completion was reported (inf: not
yet; OBSERVED: by the step in flight, reported when that step commits)."""

from __future__ import annotations

import numpy as np

OBSERVED = -1.0  # report_s of a load the step in flight found complete


class RemoteLoads:
    """The loads of one engine; `transfer_s` per request (seconds from a load's post to its completion), None when
    the engine loads nothing remotely."""

    def __init__(self, transfer_s: np.ndarray | None, n: int) -> None:
        self.on = transfer_s is not None
        self.transfer_s = None if transfer_s is None else np.asarray(transfer_s, dtype=np.float64)
        self.ids: list[int] = []
        self.ready_s = np.full(n, np.inf)
        self.report_s = np.full(n, np.inf)

    def __len__(self) -> int:
        return len(self.ids)

    def post(self, i: int, t_sched: float) -> None:
        """Request i's load is posted by the schedule made at t_sched."""
        self.ids.append(i)
        self.ready_s[i], self.report_s[i] = t_sched + self.transfer_s[i], np.inf

    def reported(self, i: int, t_sched: float) -> bool:
        """Whether request i's load was reported by t_sched (a schedule made then may run its last token)."""
        return 0.0 <= self.report_s[i] <= t_sched

    def observe(self, t_sched: float) -> None:
        """A step scheduled at t_sched runs: its worker finds the loads complete by then (reported when it commits)."""
        for i in self.ids:
            if self.report_s[i] == np.inf and self.ready_s[i] <= t_sched:
                self.report_s[i] = OBSERVED

    def report(self, now: float) -> None:
        """The step in flight commits at `now`: the loads it observed are reported."""
        for i in self.ids:
            if self.report_s[i] == OBSERVED:
                self.report_s[i] = now

    def spin(self, t: float) -> None:
        """An engine idle until `t` with loads in flight (vLLM's engine core keeps stepping, empty steps of no GPU
        work, while a request waits for its KV): each load complete by then was reported when it completed."""
        for i in self.ids:
            if self.report_s[i] == np.inf and self.ready_s[i] <= t:
                self.report_s[i] = self.ready_s[i]

    def wake_s(self) -> float:
        """When an idle engine next has a load to act on: the earliest completion not yet reported, or report not yet
        seen by a schedule; inf with none."""
        return min((self.ready_s[i] if self.report_s[i] == np.inf else self.report_s[i] for i in self.ids),
                   default=np.inf)
