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

from roofline.serving.kernel_layout import API_S, HHEAD, HLEN, HTAIL, IDS, N_RUN, THINK_S, WHEAD, WLEN, WTAIL


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


# Chat sessions (serving.clients.Arrivals with session_turns T > 1): `ses` = (order, state). `order`: the sessions'
# first turns by (engine arrival, id), all sent at the start; state[TURNS] = T (0: no sessions), state[POS] the next
# first turn of `order` to arrive, state[SIZE] the later turns sent and not yet arrived, a binary heap on
# (engine arrival, id) in state[HEAP:]. Arrivals keeps all of them in one heapq of (time, id) tuples; as every id is
# sent once, the keys are distinct and both give the requests in the same order.
TURNS, POS, SIZE, HEAP = range(4)


@njit(cache=True, inline="always")
def _before(a, b, clock):
    """Whether request a reaches the engine before request b: (clock[a], a) < (clock[b], b), heapq's tuple order."""
    return clock[a] < clock[b] or (clock[a] == clock[b] and a < b)


@njit(cache=True)
def _heap_push(state, i, clock):
    """Turn i joins the heap of later turns sent (sift up)."""
    k = state[SIZE]
    state[SIZE] = k + 1
    while k > 0:
        up = (k - 1) // 2
        if not _before(i, state[HEAP + up], clock):
            break
        state[HEAP + k] = state[HEAP + up]
        k = up
    state[HEAP + k] = i


@njit(cache=True)
def _heap_pop(state, clock):
    """The heap's first turn leaves it (the last entry sifted down from the top)."""
    k = state[SIZE] - 1
    state[SIZE] = k
    last = state[HEAP + k]
    j = 0
    while 2 * j + 1 < k:
        c = 2 * j + 1
        if c + 1 < k and _before(state[HEAP + c + 1], state[HEAP + c], clock):
            c += 1
        if not _before(state[HEAP + c], last, clock):
            break
        state[HEAP + j] = state[HEAP + c]
        j = c
    state[HEAP + j] = last


@njit(cache=True, inline="always")
def _peek(ses, clock):
    """The next session turn to reach the engine (a first turn or a later one), or -1 when none is sent."""
    order, state = ses
    head = order[state[POS]] if state[POS] < len(order) else -1
    top = state[HEAP] if state[SIZE] > 0 else -1
    if head < 0 or (top >= 0 and _before(top, head, clock)):
        return top
    return head


@njit(cache=True, inline="always")
def next_arrival(arrived, sent, clock, ses):
    """Arrivals.next_time: the engine time of the next arrival (inf while none is sent); with sessions the
    earliest turn sent (next_clock otherwise)."""
    if ses[1][TURNS] == 0:
        return next_clock(arrived, sent, clock)
    i = _peek(ses, clock)
    return clock[i] if i >= 0 else math.inf


@njit(cache=True)
def take_due(limit, arrived, sent, clock, ses):
    """Arrivals.due, one request at a time: the id of the next request that reached the engine by `limit` (removed
    from the sent ones; the caller counts it arrived), or -1. Without sessions that is request `arrived`."""
    if ses[1][TURNS] == 0:
        return arrived if arrived < sent and clock[arrived] <= limit else -1
    i = _peek(ses, clock)
    if i < 0 or clock[i] > limit:
        return -1
    order, state = ses
    if state[POS] < len(order) and order[state[POS]] == i:
        state[POS] += 1
    else:
        _heap_pop(state, clock)
    return i


@njit(cache=True)
def running_ids(r, st, ri, out):
    """The ids of replica r's running sequences, copied to `out` before a commit compacts them (a session's next
    turn is sent when one of them finishes: turn_ends); returns how many."""
    n = ri[r, N_RUN]
    for j in range(n):
        out[j] = st[r, IDS, j]
    return n


@njit(cache=True)
def turn_ends(r, st, ri, was, n_was, now, clock, send, ses, fcfg):
    """Arrivals.finished with sessions: of the `n_was` requests running on replica r before the commit at `now`
    (`was`, in position order), each that finished then sends its session's next turn (id + 1, unless it was the
    last turn) at now + think time, reaching the engine the API server's time later. The commit's compaction
    (serving.kernel_sched.complete) keeps the survivors in their order, so those that finished are the ids of `was`
    missing from st's running ids, found by one merge of the two lists (no read of `finish`, indexed by request id:
    its time is `now` exactly for them, NaN for the survivors)."""
    state = ses[1]
    turns = state[TURNS]
    w, n_run = 0, ri[r, N_RUN]
    for j in range(n_was):
        i = was[j]
        if w < n_run and st[r, IDS, w] == i:
            w += 1
            continue
        nxt = i + 1
        if nxt % turns and nxt < len(clock):
            send[nxt] = now + fcfg[THINK_S]
            clock[nxt] = send[nxt] + fcfg[API_S]
            _heap_push(state, nxt, clock)
