"""Plan: per method, how long a context and how large a batch fit, where the memory goes, and how fast."""

import streamlit as st
from roofline_app import cache

from roofline.report import dashboard as appdata

GIB = appdata.GIB
TABLE_FORMAT = {
    "effective bits": st.column_config.NumberColumn(format="%.3f", help="Bits per K/V element at the context, "
                                                    "metadata and fp16 windows included"),
    "KV per sequence (GiB)": st.column_config.NumberColumn(format="%.3f"),
    "max context at batch": st.column_config.NumberColumn(format="localized", help="Tokens per sequence that "
                                                          "fit at the scenario's batch (inf: eviction bounds it)"),
    "max batch at context": st.column_config.NumberColumn(format="localized"),
    "TTFT (s)": st.column_config.NumberColumn(format="%.3f"),
    "TPOT (ms)": st.column_config.NumberColumn(format="%.2f", help="One decode step at the context"),
    "TPOT avg (ms)": st.column_config.NumberColumn(format="%.2f", help="Mean step while generating"),
    "tokens/s": st.column_config.NumberColumn(format="localized"),
    "tokens/s at max batch": st.column_config.NumberColumn(format="localized"),
}

scenario = st.session_state["scenario"]
model, hardware = cache.load("model", scenario.model), cache.load("hardware", scenario.hardware)
workload = cache.workload(scenario)
st.title("Plan")
st.markdown(f"**{model.name}** on **{workload.gpus} x {hardware.name}** (tp {workload.tp}, pp {workload.pp}): "
            f"batch {workload.batch}, context {workload.context_tokens:,} tokens, "
            f"{workload.generated_tokens:,} generated, memory utilization {workload.gpu_memory_utilization:.2f}")

with st.spinner("Planning..."):
    plan, errors = cache.plan(scenario)
for line in errors:
    st.error(line)
if plan is None:
    st.stop()
for r in plan["results"]:
    for warning in r["warnings"]:
        st.warning(f"{r['method']}: {warning}")

rows = appdata.summary_rows(plan)
st.subheader("Summary")
st.caption("Capacity on the fullest GPU, latency from the roofline of every op, and what bounds the decode step "
           "(memory: bytes / bandwidth dominates; compute: FLOPs / peak dominates).")
st.dataframe(rows, hide_index=True, column_config=TABLE_FORMAT, key="summary")

cache.draw("capacity_chart", rows, key="capacity_chart")
st.caption("How far each method stretches the cache: the longest context every sequence of the batch can reach, "
           "and the most sequences that fit at the scenario's context.")

first = plan["results"][0]["memory"]
cache.draw("memory_chart", appdata.memory_rows(plan), first["capacity_bytes"] / GIB, first["usable_bytes"] / GIB,
           key="memory_chart")
st.caption("Where one GPU's memory goes: weights, the KV cache split into packed data, metadata (scales, zeros), "
           "fp16 windows and sinks, method parameters, activation workspace, runtime reserve, and what is left.")

cache.draw("latency_chart", rows, key="latency_chart")
st.caption("Time per output token (one decode step of the batch at the context) coloured by its bound, and time "
           "to first token (prefill of the prompts).")

c1, c2 = st.columns(2)
c1.download_button("Download plan (JSON)", appdata.plan_json(plan), file_name="plan.json",
                   mime="application/json", on_click="ignore", key="download_json")
c2.download_button("Download plan (CSV)", appdata.plan_csv(plan), file_name="plan.csv", mime="text/csv",
                   on_click="ignore", key="download_csv")
