"""`python -m roofline.dashboard.warm`: fill the content-keyed caches the dashboard reads (numbers.codegen's compiled
planners on disk, dashboard.pages' page data) in a separate process at a low CPU priority (os.nice 10: a process,
not a thread, so the server's interpreter never waits on it), so that a first visit to a page, a new GPU or a new
model costs a disk read instead of a symbolic build. The dashboard starts it once per server, after the first page
is served; every entry it writes is one the app would otherwise compute on the request (same keys), so it never
changes a number.

Order (what a visitor is likeliest to ask for next first): the slow pages (validation, claims), the default
scenario's plan and fit solver, the Pareto page's default table, the default scenario's Roofline page at every
slider context and its Sweeps rows, every catalogue spec's validated JSON, the default scenario with every weight
dtype (a shared link), every model on the default GPU (a model whose weights leave no room on one GPU at the
fewest tp x pp that holds it, as the fit solver proposes), the default model on every GPU, then every model at tp
2, 4 and 8 on the default GPU, each with the default methods in both flavours (point plans and sweeps). The
catalogue passes stop while the disk cache still has a quarter of its entries free, so the warm-up never makes it
evict.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

from roofline.errors import RooflineError


def _points(model, hardware, workload, specs) -> None:
    from roofline.methods import parse_method
    from roofline.planner.plan import method_planner

    for spec in specs:
        try:
            method_planner(model, hardware, workload, parse_method(spec)).point(workload)
        except (RooflineError, ValueError):
            continue  # does not fit or does not apply: built on demand if ever asked for


def _plan(model, hardware, workload, specs) -> None:
    from roofline.dashboard.explore import fit_solver, fits_on, sweep

    _points(model, hardware, workload, specs)
    sweep(model, hardware, workload, specs, "context")
    try:
        if not all(fits_on(model, hardware, workload, spec) for spec in specs):  # the Plan page shows the solver
            fit_solver(model, hardware, workload, specs)
    except (RooflineError, ValueError):
        pass


def _roofline_page(model, hardware, workload, specs) -> None:
    """The Roofline page of a scenario: its axes, caption, and the ops and limits at every slider context."""
    from roofline.dashboard.rooflinepage import context_options, kept

    specs = tuple(dict.fromkeys(specs))
    try:
        kept("roofline_axes", model, hardware, workload, specs)
        kept("own_op_movement", model, hardware, workload, specs)
        for context in context_options(workload.context_tokens):
            kept("roofline_data", model, hardware, workload, specs, context)
            kept("limits_rows", model, hardware, workload, specs, context)
    except (RooflineError, ValueError):
        return


def warm_scenario(model_name: str, hardware_name: str, **workload_fields) -> None:
    """Fill the caches of one scenario with the default methods, as the app's first visit to it would."""
    from roofline.catalogue import load_hardware, load_model
    from roofline.dashboard.appdata import workload_from
    from roofline.dashboard.share import defaults

    _plan(load_model(model_name), load_hardware(hardware_name), workload_from(workload_fields),
          defaults()["methods"])


def warm_pages() -> None:
    """The default scenario's pages: trust data (Validation, Claims), the plan and its fit solver, the Pareto
    page's default table, the Roofline page at every slider context and the Sweeps page's rows."""
    from roofline.analysis.quality import benchmark_specs, default_benchmark
    from roofline.catalogue import load_hardware, load_model
    from roofline.dashboard import pages as trust
    from roofline.dashboard.appdata import ROOFLINE_EXTRA, workload_from
    from roofline.dashboard.explore import sweep_kept
    from roofline.dashboard.share import defaults

    trust.claims_rows()
    base = defaults()
    workload = workload_from({})
    model, hardware = load_model(base["model"]), load_hardware(base["hardware"])
    _plan(model, hardware, workload, base["methods"])
    _points(model, hardware, workload, benchmark_specs(default_benchmark()))
    _roofline_page(model, hardware, workload, (*base["methods"], *ROOFLINE_EXTRA))
    for axis in ("context", "batch"):  # the Sweeps page's rows
        sweep_kept(model, hardware, workload, base["methods"], axis)


def warm(limit: int | None = None, models: Sequence[str] | None = None,
         hardware: Sequence[str] | None = None) -> int:
    """Fill the caches (warm_pages, then the catalogue: `models` and `hardware` restrict it to those names);
    returns how many (model, GPU, tp) scenarios were planned (at most `limit`)."""
    from roofline.catalogue import hardware_names, load_hardware, load_model, model_names
    from roofline.dashboard.appdata import catalogue_spec, workload_from
    from roofline.dashboard.share import WEIGHT_DTYPES, defaults
    from roofline.planner.parallel import tp_degrees

    warm_pages()
    for kind, names in (("hardware", hardware_names()), ("model", model_names())):
        for name in names:
            catalogue_spec(kind, name)
    base = defaults()
    workload = workload_from({})
    model, gpu = load_model(base["model"]), load_hardware(base["hardware"])
    for dtype in WEIGHT_DTYPES:
        _points(model, gpu, workload_from({"weight_dtype": dtype}), base["methods"])
    chosen_models = [m for m in model_names() if models is None or m in models]
    chosen_gpus = [h for h in hardware_names() if hardware is None or h in hardware]
    # each model where it fits, the default model on each GPU, then each model at the usual tp degrees (a visitor
    # who set tp 2 and switches model): the GPUs of one structure share their compiled plans (H100, H200, ...)
    scenarios = ([(m, base["hardware"], None) for m in chosen_models] + [(base["model"], h, None) for h in chosen_gpus]
                 + [(m, base["hardware"], tp) for tp in (2, 4, 8) for m in chosen_models])
    done = 0
    for model_name, hardware_name, tp in dict.fromkeys(scenarios):
        if (limit is not None and done >= limit) or not _room():
            break
        model, gpu = load_model(model_name), load_hardware(hardware_name)
        if tp is None:
            _plan(model, gpu, _where_it_fits(model, gpu, workload), base["methods"])
        elif tp in tp_degrees(model):
            _plan(model, gpu, workload_from({"tp": tp}), base["methods"])
        done += 1
    return done


def _room() -> bool:
    """Whether the disk cache has room for another scenario (~20-60 entries) below three quarters of
    codegen.DISK_ENTRIES: past it codegen evicts the oldest files, which are the warm-up's own first and most
    useful entries (the default pages); with no disk cache nothing warmed here outlives this process."""
    from roofline.numbers import codegen

    folder = codegen.cache_dir()
    if folder is None:
        return False
    try:
        return sum(1 for _ in folder.glob("*.json")) < codegen.DISK_ENTRIES * 3 // 4
    except OSError:
        return False


def _where_it_fits(model, hardware, workload):
    """`workload`, or, when the model's weights leave no KV pool on one GPU (the Plan page then shows its fit
    solver instead of a plan), the fewest tp x pp that holds it in bf16: what the fit solver proposes."""
    from roofline.methods import build_cache, parse_method
    from roofline.planner.memory import memory_budget
    from roofline.planner.parallel import fewest_gpus

    bf16 = parse_method("bf16")
    try:
        if memory_budget(model, hardware, workload, build_cache(bf16, model)).kv_pool > 0:
            return workload
        return fewest_gpus(model, hardware, workload, bf16)["workload"]
    except (RooflineError, ValueError):
        return workload  # nothing holds it: the planners fail fast and nothing is kept


if __name__ == "__main__":
    try:
        os.nice(10)  # the server's requests come first
    except OSError:
        pass
    sys.exit(0 if warm() >= 0 else 1)
