"""Remote KV loads on a disaggregated decode engine (serving.disagg's two hops; the state serving.scheduler.Scheduler
keeps for them, serving.kernel_remote its compiled twin): the requests whose load was posted and not yet acted on, in
the order they were posted, each one's completion (post + transfer) and when its completion was reported (inf: not
yet; OBSERVED: by the step in flight, reported when that step commits). Under a fresh pair (`simulate --cold-start`)
a load from a prefill replica this engine has not met yet first waits for the connector's handshake (Handshake)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

OBSERVED = -1.0  # report_s of a load the step in flight found complete


@dataclass
class Handshake:
    """A fresh decode engine's first contact with each prefill replica (roofline.engines.timing mechanism 13, vLLM's
    NixlConnector): the first load posted from a remote it has not met starts one handshake of `seconds` with it in
    the background (nixl/base_worker.py@v0.24.0:752-799; `seconds`: Disaggregated.handshake_s, which grows with
    the remote's whole pool where the profile carries the per-descriptor law); every load from that remote posted
    before it ends waits for the same handshake (:801-827), and is posted by the first worker call after its end
    (pull_worker.py:63-75), so its transfer starts then. `remote`: the prefill replica of each request (the decode
    pool's indices). `waits`: each load's wait in the last run (one entry per load that waited), `pairs`: handshakes
    started."""

    seconds: float
    remote: np.ndarray
    waits: list[float] = field(default_factory=list)
    pairs: int = 0

    def reset(self) -> None:
        self.waits, self.pairs = [], 0


class RemoteLoads:
    """The loads of one engine; `transfer_s` per request (seconds from a load's post to its completion), None when
    the engine loads nothing remotely; `handshake`: a fresh engine's first contacts (Handshake), None in steady
    state."""

    def __init__(self, transfer_s: np.ndarray | None, n: int, handshake: Handshake | None = None) -> None:
        self.on = transfer_s is not None
        self.transfer_s = None if transfer_s is None else np.asarray(transfer_s, dtype=np.float64)
        self.ids: list[int] = []
        self.ready_s = np.full(n, np.inf)
        self.report_s = np.full(n, np.inf)
        self.handshake = handshake
        self.met: dict[int, float] = {}  # prefill replica -> when this engine's handshake with it ends

    def _start_s(self, i: int, t_sched: float) -> float:
        """When request i's READs are posted: at t_sched, or at the end of the handshake with its remote."""
        if self.handshake is None:
            return t_sched
        remote = int(self.handshake.remote[i])
        if remote not in self.met:
            self.met[remote] = t_sched + self.handshake.seconds
            self.handshake.pairs += 1
        if self.met[remote] <= t_sched:
            return t_sched
        self.handshake.waits.append(self.met[remote] - t_sched)
        return self.met[remote]

    def __len__(self) -> int:
        return len(self.ids)

    def post(self, i: int, t_sched: float) -> None:
        """Request i's load is posted by the schedule made at t_sched."""
        self.ids.append(i)
        self.ready_s[i], self.report_s[i] = self._start_s(i, t_sched) + self.transfer_s[i], np.inf

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
