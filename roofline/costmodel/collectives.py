"""The all-to-all of expert parallelism on a device's links (the ring all-reduce stays in costmodel.device).

Each of the ep ranks sends its message (already the (ep - 1)/ep share bound for the other ranks:
costmodel.blocks.alltoall) to the ep - 1 others while receiving as much, over a full-duplex link:

    t_all-to-all = message / link bandwidth (per GPU per direction) + (ep - 1) x hop latency

The bandwidth term is nccl-tests' own law: src/alltoall.cu (AlltoAllGetBw) reports bus bandwidth =
(n - 1)/n x the bytes each rank exchanges / time, so the time at a link's bus bandwidth is (n - 1)/n x bytes /
bandwidth; NCCL runs an all-to-all as n - 1 point-to-point send/receive pairs in one group, counted here as
n - 1 hop latencies (an upper bound: the pairs are in flight together). The ranks sit on the stage's
tp x ep GPUs: inside the scale-up domain the scale-up link carries it, else the scale-out link does.
"""

from __future__ import annotations

from roofline.lazy import sp


def alltoall_time(message_bytes, ranks: int, bandwidth, latency) -> sp.Expr:
    """Seconds of one all-to-all in which each GPU sends `message_bytes` to the other ranks - 1 replicas over a
    link of `bandwidth` bytes/s and `latency` s per hop (numbers, or the symbolic ceilings of costmodel.ceilings):
    message / bandwidth + (ranks - 1) x latency (module docstring). The link is chosen by Roofline._alltoall_link."""
    return sp.sympify(message_bytes) / bandwidth + (ranks - 1) * latency
