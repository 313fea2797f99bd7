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
from roofline.specs import Hardware, Link


def alltoall_link(hardware: Hardware, ranks: int, gpus: int) -> Link:
    """The link an all-to-all over `ranks` expert-parallel replicas spanning `gpus` GPUs (tp x ep) runs on:
    scale-up when they fit its domain, else scale-out; ValueError naming `ep` when the device has neither."""
    if hardware.scale_up is not None and gpus <= hardware.scale_up.max_gpus:
        return hardware.scale_up
    if hardware.scale_out is None:
        raise ValueError(f"ep: {ranks} replicas ({gpus} GPUs with tp) exceed {hardware.name}'s scale-up domain "
                         "and it has no scale-out link")
    return hardware.scale_out


def alltoall_seconds(hardware: Hardware, message_bytes, ranks: int, gpus: int) -> sp.Expr:
    """Seconds of one all-to-all in which each GPU sends `message_bytes` to the other ranks - 1 replicas:
    message / link bandwidth + (ranks - 1) x hop latency (module docstring)."""
    link = alltoall_link(hardware, ranks, gpus)
    return sp.sympify(message_bytes) / link.bytes_per_s + (ranks - 1) * link.latency_s
