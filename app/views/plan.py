"""Plan: per method, how long a context and how large a batch fit, where the memory goes, how fast, and how far to
trust it; when something does not fit, the fit solver says what would."""

import streamlit as st
from roofline_app import cache, charts

from roofline import report as fmt
from roofline.report import dashboard as appdata
from roofline.report import display

scenario = st.session_state["scenario"]
model, hardware, workload = cache.specs_of(scenario)
st.header("Plan")
st.caption(fmt.md_escape(
    f"{model.name} on {workload.gpus} x {hardware.name} (tp {workload.tp}, pp {workload.pp}, weights "
    f"{workload.weight_dtype}): batch {workload.batch}, context {workload.context_tokens:,} tokens, "
    f"{workload.generated_tokens:,} generated, memory utilization {workload.gpu_memory_utilization:.2f}; the model's "
    f"max positions {model.max_position_embeddings:,}"))

plan, errors = cache.plan(scenario)
# the fit solver's slot is always there (empty when all fits): what it holds never moves the elements after it, so
# an Apply that makes a method fit (or not) updates the tabs, tables and chart in place instead of remounting them
fit_slot = st.container()
if errors or (plan and not all(r["fits"] for r in plan["results"])):
    failing = len(errors) + sum(not r["fits"] for r in (plan or {"results": []})["results"])
    fit_slot.warning(f"{failing} of {len(scenario.specs)} methods do not fit as set. What would:",
                     icon=":material/warning:")
    fit_rows = cache.fit(scenario)
    with fit_slot:
        cache.text_table(display.fit_table(fit_rows))
    if errors:
        fit_slot.expander("Why (one line per method)").text("\n".join(errors))
    with fit_slot:
        cache.downloads("fit", fit_rows, key="fit")
elif scenario.tpot_target_s:
    with fit_slot:
        cache.text_table(display.fit_table(cache.fit(scenario)))
if plan is None:
    st.stop()

errors_by_method = cache.latency_errors(scenario, plan)
rows = appdata.summary_rows(plan)
# only the open tab runs and is sent (a tab click reruns): at most one chart (static SVG images, roofline_app.charts),
# and the first paint (Summary) none, nor a data grid: the summary and the fit solver are Markdown tables
# (cache.text_table), so a cold load or a shared link loads no data-grid bundle and imports no pandas
tab_summary, tab_capacity, tab_memory, tab_latency = st.tabs(["Summary", "Capacity", "Memory", "Latency"],
                                                             key="plan_tab", on_change="rerun")
if tab_summary.open:
    with tab_summary:
        cache.text_table(display.summary_table(plan, model.max_position_embeddings, errors_by_method))
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
                   "prompts. The Summary's last column gives each TPOT's measured error (validate/results).")
cache.downloads("plan", plan, key="plan", csv_text=lambda: appdata.plan_csv(plan),
                json_text=lambda: appdata.plan_json(plan))
