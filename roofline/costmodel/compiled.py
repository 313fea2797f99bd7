"""A phase's op graph on one device, compiled to numeric functions once (roofline.numbers.codegen): the per-op rows
(FLOPs, bytes, compute / memory / communication time, time) and the phase total, of the workload symbols.

This is what the planner evaluates; the sympy graph is built only when the compiled form is not cached
(key: the content of model, method, the device's ceiling structure (which ceilings it has, not their numbers),
options and graph parameters); the device's numbers are bound when the compiled form is loaded. Rows carry the
same numbers as Roofline.evaluate on the graph, in the same op order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from roofline import units
from roofline.costmodel.device import CEILING_FIELDS, Roofline, binding_ceiling
from roofline.costmodel.graph import Graph
from roofline.costmodel.ops import TRAFFIC
from roofline.lazy import sp
from roofline.numbers import codegen
from roofline.units import _kink_pairs

ROW_FIELDS = ("matmul_flops", "vector_flops", "bytes", "compute_s", "memory_s", "comm_s", "time_s")


@dataclass
class GraphKernel:
    """Compiled rows and total of one graph on one device; `symbols` name the functions' arguments. The rows are
    a compile of their own, loaded on first use (`load_rows`): a plan needs only the total, the summary and the
    op times, and the rows were a third of the text to print and compile."""

    symbols: tuple[str, ...]
    ops: tuple[dict[str, Any], ...]  # name, group, count, source, dtype, is_comm, timed
    functions: dict[str, Callable]
    roof: Roofline
    load_rows: Callable[[], Callable] | None = field(default=None, repr=False)  # None: compiled without rows

    def total(self, *args: float) -> float:
        """Phase time: sum over ops of count x op time."""
        return self.functions["total"](*args)

    def kinks(self, *args: float) -> list[tuple[float, float]]:
        """(slope, intercept) in the last symbol of every Min/Max argument difference that is affine in it."""
        return self.functions["kinks"](*args) if "kinks" in self.functions else []

    def raw_rows(self, *args: float) -> list[list[float]]:
        """Per op: ROW_FIELDS, the bytes of each TRAFFIC class (per instance), then CEILING_FIELDS."""
        if "rows" not in self.functions and self.load_rows is not None:
            self.functions["rows"] = self.load_rows()
        return self.functions["rows"](*args)

    def op_times(self, *args: float) -> list[float]:
        """Each op's time (one instance; rows' time_s) at this point, without the rest of the rows: the generated
        summary's op times in the scalar flavour (the same expressions, so the same floats), else `times`."""
        if "times" in self.functions:
            return self.functions["times"](*args)
        return [values[0] for values in self.functions["summary"](*args)]

    @cached_property
    def _static(self) -> tuple[tuple[int, bool, bool, str], ...]:
        """Per op what `summarize` needs besides the numbers: (count, is_comm, timed, name)."""
        return tuple((op["count"], op["is_comm"], op["timed"], op["name"]) for op in self.ops)

    @cached_property
    def _latency_floor(self) -> float:
        return self.roof.latency_floor()

    def summary(self, *args: float) -> dict[str, Any]:
        """The phase at this point without building rows: total time, summed compute / memory / communication
        times, the time-weighted bound (the bound of the ops that take most of the time) and the top op, all
        computed from the generated `summary`'s numbers (_summary_program, summarize). Scalar flavour only."""
        if "summary" not in self.functions:
            raise ValueError("flavour: summary() needs a kernel compiled in the 'scalar' flavour with rows")
        total, compute, memory, comm, by_bound, top, top_time, top_bound = summarize(
            self.functions["summary"](*args), self._static, self._latency_floor)
        return {"total_s": total, "compute_s": compute, "memory_s": memory, "comm_s": comm,
                "bound": max(by_bound, key=by_bound.get), "dominant_op": top, "dominant_time_s": top_time,
                "dominant_bound": top_bound}

    def rows(self, *args: float) -> list[dict[str, Any]]:
        """Roofline.evaluate's rows at this point (per-op numbers, intensity, ridge, bound)."""
        floor = self.roof.latency_floor()
        out = []
        for op, numbers in zip(self.ops, self.raw_rows(*args), strict=True):
            num = {k: float(v) for k, v in zip(ROW_FIELDS, numbers[:7], strict=True)}
            ceil = {k: float(v) for k, v in zip(CEILING_FIELDS, numbers[7 + len(TRAFFIC):], strict=True)}
            flops = num["matmul_flops"] + num["vector_flops"]
            if op["is_comm"]:
                bound = "communication"
            elif op["timed"] and floor > 0 and num["time_s"] <= floor:
                bound = "latency"
            else:
                bound = binding_ceiling(num["compute_s"], num["memory_s"], *ceil.values())
            out.append({
                "name": op["name"], "group": op["group"], "count": op["count"], "source": op["source"],
                "dtype": op["dtype"], **num, **ceil, "flops": flops,
                "traffic": {c: float(v) for c, v in zip(TRAFFIC, numbers[7:7 + len(TRAFFIC)], strict=True)},
                "intensity_flops_per_byte": flops / num["bytes"] if num["bytes"] else float("inf"),
                "ridge_flops_per_byte": self.roof.ridge_point(op["dtype"]),
                "bound": bound,
            })
        return out


def _kink_coefficients(total: sp.Expr, symbol: sp.Symbol) -> list[list[sp.Expr]]:
    """[slope, intercept] in `symbol` of each affine Min/Max argument difference of `total` (other symbols free)."""
    out, seen = [], set()
    for diff in _kink_pairs(total, symbol):
        try:
            poly = sp.Poly(diff, symbol)
        except sp.PolynomialError:
            continue
        if poly.degree() != 1:
            continue
        slope, intercept = poly.all_coeffs()
        if (slope, intercept) not in seen:
            seen.add((slope, intercept))
            out.append([slope, intercept])
    return out


def _total_program(times: list, counts: list[int]) -> codegen.Program:
    """The phase time as count x op time summed in op order, each op's time a local: the order in which the
    generated summary adds them, so `total` and `summary`'s total are the same float (and an op equal to an
    earlier one is that local, codegen.Program). Equal to Roofline.time(graph) (sympy's Add of the same terms)."""
    assign = tuple((f"_t{k}", t) for k, t in enumerate(times))
    terms = " + ".join(f"{n}*_t{k}" for k, n in enumerate(counts))
    return codegen.Program(assign, (f"return 0.0 + {terms}" if terms else "return 0.0",))


def _summary_program(rows: list[list], ops: list[dict]) -> codegen.Program:
    """The numbers GraphKernel.summary needs, as straight-line code: per op its time and the parts its bound is
    chosen from (compute, memory, communication; shared memory, L2, launch latency and issue where the op has
    them: a part that is zero in every case is None, left out). Returns per op (time, compute, memory, comm, shared,
    l2, latency, issue); the classification and the sums over ops are `summarize`, plain Python over those numbers
    (generated straight-line per op, they were three quarters of the text to compile)."""
    at = 7 + len(TRAFFIC)
    assign: list[tuple[str, Any]] = []
    values: list[str] = []

    def local(tag: str, k: int, expr) -> str:
        if sp.sympify(expr) == 0:
            return "None"
        assign.append((f"_{tag}{k}", expr))
        return f"_{tag}{k}"

    for k, (row, op) in enumerate(zip(rows, ops, strict=True)):
        # the parts before the wholes that hold them (issue inside compute, compute and memory inside the time):
        # a later expression equal to an earlier local is printed as its name (codegen._sources)
        shared, l2, latency, issue = (("None",) * 4 if op["is_comm"] else
                                      tuple(local(tag, k, row[at + j]) for j, tag in enumerate("slai")))
        c, m, x = local("c", k, row[3]), local("m", k, row[4]), local("x", k, row[5])
        assign.append((f"_t{k}", row[6]))
        values.append(f"(_t{k}, {c}, {m}, {x}, {shared}, {l2}, {latency}, {issue})")
    return codegen.Program(tuple(assign), (f"return ({''.join(v + ', ' for v in values)})",))


def summarize(values: tuple[tuple, ...], ops: tuple[tuple[int, bool, bool, str], ...], latency_floor: float) -> tuple:
    """GraphKernel.summary's figures from the generated summary's values (_summary_program) and per op (count,
    is_comm, timed, name). Per op its binding ceiling (binding_ceiling's comparisons over the parts it has; a timed
    op at or under the device's latency floor is 'latency'; comm ops are 'communication'). Then, in op order: the
    count-weighted time summed overall and per ceiling (an op taking no time adds nothing once a top op exists),
    the op taking the most time and its ceiling, and the count-weighted sums of compute, memory and communication
    time (each summed from its first present term, left to right). Returns (total, compute, memory, comm,
    {ceiling: time}, top op, its time, its ceiling)."""
    total, by_bound, top, top_time, top_bound = 0.0, {}, None, -1.0, ""
    compute = memory = comm = None
    for (t, c, m, x, shared, l2, latency, issue), (count, is_comm, timed, name) in zip(values, ops, strict=True):
        if c is not None:
            compute = count * c if compute is None else compute + count * c
        if m is not None:
            memory = count * m if memory is None else memory + count * m
        if x is not None:
            comm = count * x if comm is None else comm + count * x
        w = count * t
        if is_comm:
            kind = "communication"
        else:
            if w == 0 and top is not None:
                continue
            kind, v = "memory", (0 if m is None else m)
            if c is not None and c > v:
                kind, v = ("issue" if issue is not None and issue > c - issue else "compute"), c
            if shared is not None and shared > v:
                kind, v = "shared-memory", shared
            if l2 is not None and l2 > v:
                kind, v = "l2", l2
            if latency is not None and latency > v:
                kind = "latency"
            if timed and latency_floor > 0 and t <= latency_floor:
                kind = "latency"
        total += w
        by_bound[kind] = by_bound.get(kind, 0.0) + w
        if w > top_time:
            top, top_time, top_bound = name, w, kind
    return (total, 0.0 if compute is None else compute, 0.0 if memory is None else memory,
            0.0 if comm is None else comm, by_bound, top, top_time, top_bound)


def graph_kernel(roof: Roofline, key: str | None, build: Callable[[], Graph], symbols: tuple[str, ...],
                 flavour: str = "scalar", kinks_in: str | None = None, rows: bool = True) -> GraphKernel:
    """Compile (or load) `build()`'s graph on `roof` as functions of `symbols` (names of roofline.units' symbols,
    resolved only on a miss: a cached kernel needs no sympy); `kinks_in`: also the kinks of the total in that
    symbol, as functions of the other symbols. `key` None: no caching (the graph has no content
    key, e.g. one built from a bare CacheModel). `rows` False: only the total (and kinks).
    The expressions hold the device's ceilings as symbols (Roofline.as_symbolic), bound to `roof`'s numbers on
    load: `key` names the device by `roof.structure()`, not its numbers, so devices of one structure share it."""

    with_rows, symbolic = rows, roof.as_symbolic()

    def op_rows(graph: Graph) -> list[list]:
        out = []
        for op in graph.ops:
            t = symbolic.op_times(op)
            out.append([op.matmul_flops, op.vector_flops, op.bytes, t.compute, t.memory, t.comm, t.total,
                        *(op.traffic.get(c, 0) for c in TRAFFIC), t.shared, t.l2, t.latency, t.issue])
        return out

    def make() -> tuple[list, dict[str, Any], dict[str, Any]]:
        graph = build()
        rows, ops = op_rows(graph), []
        for op, row in zip(graph.ops, rows, strict=True):
            ops.append({"name": op.name, "group": op.group, "count": op.count, "source": op.source,
                        "dtype": op.dtype, "is_comm": bool(op.is_comm), "timed": bool(row[6] != 0)})
        exprs: dict[str, Any] = {"total": _total_program([row[6] for row in rows], [op["count"] for op in ops])}
        if with_rows and flavour == "scalar":  # op times: the summary's
            exprs["summary"] = _summary_program(rows, ops)
        elif with_rows:
            exprs["times"] = [row[6] for row in rows]
        if kinks_in is not None:
            # slope and intercept are free of `kinks_in`: compiled with the same arguments, it is ignored
            exprs["kinks"] = _kink_coefficients(symbolic.time(graph), getattr(units, kinks_in))
        dtypes = sorted({op.dtype for op in graph.ops if not op.is_comm})  # each needs the device's peak
        return [getattr(units, name) for name in symbols], exprs, {"ops": ops, "dtypes": dtypes}

    bind = roof.bindings()

    def load_rows() -> Callable:
        def make_rows() -> tuple[list, dict[str, Any], dict[str, Any]]:
            return [getattr(units, name) for name in symbols], {"rows": op_rows(build())}, {}

        return codegen.compiled(None if key is None else f"{key}-rows", make_rows, flavour, bind=bind)[0]["rows"]

    functions, meta = codegen.compiled(key, make, flavour, bind=bind)
    for dtype in meta["dtypes"]:
        roof.matmul_peak(dtype)  # raises as building the graph on `roof` would: the device lacks this dtype
    return GraphKernel(tuple(symbols), tuple(meta["ops"]), functions, roof, load_rows if with_rows else None)
