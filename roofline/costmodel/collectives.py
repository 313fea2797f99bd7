"""Collectives on a device's links: the all-to-all of expert parallelism, and NCCL's ring all-reduce model.

Each of the ep ranks sends its message (already the (ep - 1)/ep share bound for the other ranks:
costmodel.blocks.alltoall) to the ep - 1 others while receiving as much, over a full-duplex link:

    t_all-to-all = message / link bandwidth (per GPU per direction) + (ep - 1) x hop latency

The bandwidth term is nccl-tests' own law: src/alltoall.cu (AlltoAllGetBw) reports bus bandwidth =
(n - 1)/n x the bytes each rank exchanges / time, so the time at a link's bus bandwidth is (n - 1)/n x bytes /
bandwidth; NCCL runs an all-to-all as n - 1 point-to-point send/receive pairs in one group, counted here as
n - 1 hop latencies (an upper bound: the pairs are in flight together). The ranks sit on the stage's
tp x ep GPUs: inside the scale-up domain the scale-up link carries it, else the scale-out link does.

The all-reduce of tensor parallelism takes NCCL's own tuner model (`allreduce_time`, notes below): the smallest of
three protocols' latency + bytes / bandwidth lines, the latencies NCCL's constants, the bandwidth the link's.
"""

from __future__ import annotations

from roofline.lazy import sp


def alltoall_time(message_bytes, ranks: int, bandwidth, latency) -> sp.Expr:
    """Seconds of one all-to-all in which each GPU sends `message_bytes` to the other ranks - 1 replicas over a
    link of `bandwidth` bytes/s and `latency` s per hop (numbers, or the symbolic ceilings of costmodel.ceilings):
    message / bandwidth + (ranks - 1) x latency (module docstring). The link is chosen by Roofline._alltoall_link."""
    return sp.sympify(message_bytes) / bandwidth + (ranks - 1) * latency


# NCCL's ring all-reduce cost model, from its tuner: NVIDIA/nccl tag v2.28.9-1 (commit dbc86fd06e8b, the NCCL the
# H200 x2 run used), src/graph/tuning.cc. ncclTopoTuneModel sets, per algorithm a and protocol p,
#   latency_p = baseLatencies[Ring][p] + nsteps x hwLatencies[hw][Ring][p]      (l. 353-379; nsteps = 2(n - 1)
#               for an all-reduce, l. 268; hw: NVLINK / PCI for one node, NET across nodes, l. 264-265)
#   busBw_p   = nChannels x bwIntra x factor_p: LL 0.5 capped at llMaxBw, LL128 0.92, Simple 1   (l. 304-305)
#   algoBw_p  = busBw_p x n / nsteps                                                            (l. 348)
# and ncclTopoGetAlgoTime (l. 599) predicts time_p = latency_p + bytes / algoBw_p; the tuner runs the algorithm and
# protocol of the smallest predicted time. So for a ring all-reduce of S bytes over n GPUs:
#   t = min over p of [ latency_p(n) + 2(n - 1)/n x S / busBw_p ]
# A tp group beyond the scale-up domain is priced with every step on the network row (NCCL runs the intra-node
# steps at the NVLink latency and 2(nNodes - 1) steps at the network's, l. 371-379): an upper bound there.
# Tables in microseconds (and GB/s), as in tuning.cc l. 143-172:
PROTOCOLS = ("LL", "LL128", "Simple")
RING_BASE_LATENCY_US = {"LL": 6.6, "LL128": 14.0, "Simple": 8.4}  # baseLatencies[Ring]
RING_HOP_LATENCY_US = {  # hwLatencies[hw][Ring]
    "nvlink": {"LL": 0.6, "LL128": 1.9, "Simple": 3.4},
    "pci": {"LL": 1.0, "LL128": 2.5, "Simple": 5.7},
    "net": {"LL": 2.7, "LL128": 4.0, "Simple": 14.0},
}
BUS_BW_FACTOR = {"LL": (1, 2), "LL128": (23, 25), "Simple": (1, 1)}  # 0.5, 0.92 (120/128 quoted), 1: a ratio
LL_MAX_BW_GBS = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 282.0}  # llMaxBws[arch][one node]


def nccl_hw(kind: str, scale_out: bool) -> str:
    """NCCL's hardware class of a link ('nvlink', 'pci', 'net'): a scale-out link is the network; a scale-up
    NVLink, or AMD's Infinity Fabric (RCCL, NCCL's fork, files xGMI as NVLink), is 'nvlink'; PCIe is 'pci';
    anything else (a RoCE scale-up) is 'net'."""
    k = kind.lower()
    if scale_out:
        return "net"
    if k.startswith("nvlink") or k.startswith("infinity") or k.startswith("xgmi"):
        return "nvlink"
    return "pci" if k.startswith("pcie") else "net"


def ring_latencies(hw: str, ranks: int) -> dict[str, float]:
    """Seconds of each protocol's ring all-reduce latency over `ranks` GPUs on NCCL hardware class `hw`:
    baseLatencies[Ring][p] + 2(n - 1) x hwLatencies[hw][Ring][p] (tuning.cc, the tables above)."""
    steps = 2 * (ranks - 1)
    return {p: (RING_BASE_LATENCY_US[p] + steps * RING_HOP_LATENCY_US[hw][p]) * 1e-6 for p in PROTOCOLS}


def ll_max_bw(architecture: str | None, hw: str) -> float | None:
    """Bytes/s cap of the LL protocol's bus bandwidth inside one node (llMaxBws[architecture][N1]); None across
    nodes (there NCCL keys it by CPU vendor) or for an architecture NCCL's table lacks."""
    if hw == "net" or architecture is None:
        return None
    gbs = LL_MAX_BW_GBS.get(architecture.lower())
    return gbs * 1e9 if gbs is not None else None


def protocol_times(message_bytes, ranks: int, bandwidth, latencies, ll_cap=None) -> dict:
    """Each protocol's predicted ring all-reduce time (NCCL's, module notes): latency_p + 2(n-1)/n x S / busBw_p
    with busBw_p = bandwidth x factor_p (LL also capped at `ll_cap` where given). `bandwidth` is the link's bus
    bandwidth (Simple's), `latencies` {protocol: seconds} (numbers or the symbolic ceilings)."""
    traffic = 2 * sp.Rational(ranks - 1, ranks) * sp.sympify(message_bytes)
    times = {}
    for p in PROTOCOLS:
        bus = sp.Rational(*BUS_BW_FACTOR[p]) * bandwidth
        if p == "LL" and ll_cap is not None:
            bus = _min([bus, sp.sympify(ll_cap)])
        times[p] = latencies[p] + traffic / bus
    return times


def allreduce_time(message_bytes, ranks: int, bandwidth, latencies, ll_cap=None) -> sp.Expr:
    """Seconds of one ring all-reduce of `message_bytes` over `ranks` GPUs as NCCL's tuner predicts it: the
    smallest of `protocol_times` (a sympy Min while the message size or the ceilings are symbols)."""
    return _min(list(protocol_times(message_bytes, ranks, bandwidth, latencies, ll_cap).values()))


def _min(terms: list) -> sp.Expr:
    """min() of numbers, else an unevaluated sympy Min (argument comparison is the slow part of sympy)."""
    terms = [sp.sympify(t) for t in terms]
    if all(t.is_Number for t in terms):
        return min(terms)
    return sp.Min(*terms, evaluate=False)
