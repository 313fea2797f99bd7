"""Plan: the answer first (how many methods fit, the best for the chosen constraint, how far to trust it), then per
method how long a context and how large a batch fit, where the memory goes and how fast; the rows that do not fit
are listed apart and never ranked, and the fit solver says what would make them fit."""

import streamlit as st
from roofline_app import cache, charts, loading

from roofline import report as fmt
from roofline.dashboard import appdata
from roofline.dashboard import trust as trust_caption
from roofline.report import answer, display
from roofline.stored_bytes import uncounted_towers

BY = {"tokens": "most tokens/s", "context": "longest context", "batch": "most sequences"}

scenario = st.session_state["scenario"]
model, hardware, workload = cache.specs_of(scenario)
st.subheader("Plan")
st.caption(fmt.md_escape(
    f"{model.name} on {workload.gpus} x {hardware.name} (tp {workload.tp}, pp {workload.pp}, weights "
    f"{workload.weight_dtype}): batch {workload.batch}, context {workload.context_tokens:,} tokens, "
    f"{workload.generated_tokens:,} generated, memory utilization "
    f"{'the engine default' if workload.gpu_memory_utilization is None else f'{workload.gpu_memory_utilization:.2f}'}"
    f"; the model's "
    f"max positions {model.max_position_embeddings:,}; engine {workload.engine}"
    + (f", {host}" if (host := display.host_text(workload.engine, workload.host_speed)) else "")))

plan, errors = cache.plan(scenario)
c_by, c_all = st.columns([3, 2], vertical_alignment="bottom")
by = c_by.segmented_control("Best method for", list(BY), format_func=BY.get, key="best_by", default="tokens",
                            help="Ranks the methods that fit by this constraint; those that do not fit are never "
                                 "ranked.") or "tokens"
c_all.button("Compare all methods", key="all_methods", on_click=appdata.select_all_methods,
             args=(st.session_state, model), help="Plan every preset that applies to this model (the CLI's "
             "`roofline best` / `plan --all-methods`).", use_container_width=True)


def fit_solver() -> None:
    """What would make the methods that do not fit fit (after the answer: it never pushes the answer down)."""
    if errors or not all(r["fits"] for r in (plan or {"results": []})["results"]):
        failing = len(errors) + sum(not r["fits"] for r in (plan or {"results": []})["results"])
        st.warning(f"{failing} of {len(scenario.specs)} methods do not fit as set. What would:",
                   icon=":material/warning:")
        cache.text_table(display.fit_table(cache.fit(scenario)))
        if errors:
            st.expander("Why (one line per method)").text("\n".join(errors))
    elif scenario.tpot_target_s:
        cache.text_table(display.fit_table(cache.fit(scenario)))


if plan is None:
    st.error(f"**Answer:** none of the methods fits ({len(errors)} of {len(scenario.specs)} cannot be planned "
             f"on this hardware as set)")
    fit_solver()
    loading.stop()
best = answer.answer_plan(plan, model, hardware, by)
line = "**Answer:** " + fmt.md_escape(answer.headline(plan).removeprefix("answer: "))
(st.success if best else st.error)(line)
misses = answer.misses_lines(plan["results"], model.max_position_embeddings)
if towers := uncounted_towers(model):  # a wrapper's tower the weights leave out (as `roofline plan` warns)
    misses.append(f"warning: {towers}")
st.caption("  \n".join(fmt.md_escape(m) for m in [*misses, *trust_caption.plan_caption_lines(
    plan["trust"]["text"], hardware, workload, model)]))

rows = appdata.summary_rows(plan)
# only the open tab runs and is sent (a tab click reruns): at most one chart (static SVG images, roofline_app.charts),
# and the first paint (Summary) none, nor a data grid: the tables are Markdown (cache.text_table), so a cold load or
# a shared link loads no data-grid bundle and imports no pandas
tab_summary, tab_capacity, tab_memory, tab_latency = st.tabs(["Summary", "Capacity", "Memory", "Latency"],
                                                             key="plan_tab", on_change="rerun")
if tab_summary.open:
    with tab_summary:
        ranked, not_fit = display.answer_tables(plan, model.max_position_embeddings)
        cache.text_table(ranked)
        if not_fit:
            st.caption("Do not fit as set (not ranked):")
            cache.text_table(not_fit)
        notes = display.warning_lines(plan)  # one element whatever their number (nothing after it moves)
        st.caption("  \n".join(fmt.md_escape(f"Note: {line}") for line in notes) if notes else " ")
if tab_capacity.open:
    with tab_capacity:
        cache.images(*charts.capacity_chart(rows, model.max_position_embeddings))
        st.caption("Per method: the longest context that fits at the batch (drawn up to the model's max positions) "
                   "and the largest batch that fits at the context.")
if tab_memory.open:
    with tab_memory:
        first = plan["results"][0]["memory"]
        cache.images(charts.memory_chart(appdata.memory_rows(plan), first["capacity_bytes"] / appdata.GIB,
                                         first["usable_bytes"] / appdata.GIB))
        st.caption("Where one GPU's memory goes: weights, the KV cache (packed data, metadata, fp16 windows and "
                   "sinks), method parameters, activation workspace, runtime reserve, and what is left.")
if tab_latency.open:
    with tab_latency:
        cache.images(*charts.latency_chart(rows))
        st.caption("TPOT: one decode step of the batch at the context, coloured by its bound; TTFT: prefill of the "
                   "whole batch's prompts. The Summary's trust column gives each number's source and error band.")
cache.downloads("plan", plan, key="plan", csv_text=lambda: appdata.plan_csv(plan),
                json_text=lambda: appdata.plan_json(plan))

fit_solver()
