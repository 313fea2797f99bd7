"""The queues of serving.kernel_loop's compiled record loop (numba njit, cache=True): a replica's waiting queue and
the requests held under the engine's admission lag (both linked lists over request ids through `nxt`: a request is
in at most one of them), and the closed-loop clients' sends.

- Waiting: Scheduler.waiting (first come first served; a preempted request returns to its head).
- Held: Fleet's `_Replica.held`, the requests routed to a replica while its block runs under vLLM's async scheduling
  (EngineScheduling.admission_lag): they join the waiting queue once a step has started after their arrival
  (`admit_held`), in arrival order.
- Sends: serving.clients.Arrivals with `max_concurrency` N: request i (in order) is sent at max(a_i, the time a
  slot frees + think time); a slot frees at each completion. While requests remain unsent, every freed slot is taken
  at once (Arrivals._release_slots drains the heap), so request i >= N is sent at max(a_i, T + think) where T is the
  (i - N + 1)-th completion's time; with arrival times in order the sends are in id order and nondecreasing, which
  the loop's arrival pointer needs (serving.kernel.covers checks the order).
"""

import math

import numpy as np
from numba import njit

from roofline.serving.kernel_layout import API_S, HHEAD, HLEN, HTAIL, THINK_S, WHEAD, WLEN, WTAIL


@njit(cache=True, inline="always")
def _push(r, i, ri, nxt, head, tail, length):
    """Request i joins the tail of one of replica r's linked lists (its ri fields head, tail, length)."""
    nxt[i] = -1
    if ri[r, length] == 0:
        ri[r, head] = i
    else:
        nxt[ri[r, tail]] = i
    ri[r, tail] = i
    ri[r, length] += 1


@njit(cache=True, inline="always")
def enqueue(r, i, ri, nxt):
    """Request i joins the tail of replica r's waiting queue."""
    _push(r, i, ri, nxt, WHEAD, WTAIL, WLEN)


@njit(cache=True, inline="always")
def hold(r, i, ri, nxt):
    """Request i is routed to replica r during its block under the admission lag: held, not yet seen."""
    _push(r, i, ri, nxt, HHEAD, HTAIL, HLEN)


@njit(cache=True)
def admit_held(r, until, ri, nxt, clock):
    """_Replica.admit: the held requests that reached the engine by `until` join the waiting queue, in order."""
    while ri[r, HLEN] > 0 and clock[ri[r, HHEAD]] <= until:
        i = ri[r, HHEAD]
        ri[r, HHEAD] = nxt[i]
        ri[r, HLEN] -= 1
        enqueue(r, i, ri, nxt)
    if ri[r, HLEN] == 0:
        ri[r, HHEAD] = -1
        ri[r, HTAIL] = -1


@njit(cache=True)
def release(ended, now, sent, clock, send, arrival, fcfg):
    """Arrivals.finished under --max-concurrency: each of `ended` completions at `now` frees a slot, taken by the
    next unsent request at max(its arrival, now + think); its engine arrival is that plus the API server's time.
    Returns the requests sent so far."""
    free = now + fcfg[THINK_S]
    for _ in range(ended):
        if sent >= len(clock):
            break
        t = max(arrival[sent], free)
        send[sent] = t
        clock[sent] = t + fcfg[API_S]
        sent += 1
    return sent


@njit(cache=True, inline="always")
def next_clock(arrived, sent, clock):
    """The engine time of the next arrival (inf while none is sent: every client waits on a request in flight)."""
    return clock[arrived] if arrived < sent else math.inf


@njit(cache=True)
def clock_arrivals(arrival_s):
    """serving.clients._clock_arrivals compiled (the same floating-point operations): each arrival is a wait from the
    previous one, so the clock reads now + (t - now)."""
    out = np.empty(len(arrival_s))
    now = 0.0
    for i in range(len(arrival_s)):
        t = arrival_s[i]
        if t > now:
            now = now + (t - now)
        out[i] = now
    return out
