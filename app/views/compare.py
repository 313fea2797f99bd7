"""Compare: the scenario's methods side by side, and the papers' quality figures against computed memory."""

import streamlit as st
from roofline_app import cache

from roofline.analysis import quality
from roofline.report import dashboard as appdata

scenario = st.session_state["scenario"]
workload = cache.workload(scenario)
st.title("Compare")

plan, errors = cache.plan(scenario)
for line in errors:
    st.error(line)
if plan is not None:
    rows = appdata.compare_rows(plan)
    st.dataframe(rows, hide_index=True, key="compare_table", column_config={
        "effective bits": st.column_config.NumberColumn(format="%.3f"),
        "compression vs 16-bit": st.column_config.NumberColumn(format="%.2fx"),
        "max context at batch": st.column_config.NumberColumn(format="localized"),
        "max batch at context": st.column_config.NumberColumn(format="localized"),
        "TPOT (ms)": st.column_config.NumberColumn(format="%.2f"),
        "tokens/s": st.column_config.NumberColumn(format="localized")})
    cache.draw("compare_chart", rows, key="compare_chart")
    st.caption(f"At batch {workload.batch} and context {workload.context_tokens:,}: bits per K/V element (metadata "
               "and fp16 windows included), compression = 16 / bits, the longest context that fits (unbounded "
               "eviction methods left out of that panel), and the decode step.")

st.subheader("Quality against memory (paper figures)")
benchmarks = quality.benchmarks()
benchmark = st.selectbox("Benchmark (paper, table, model, dataset)", benchmarks, key="benchmark")
rows = cache.quality(benchmark, workload.context_tokens)
if any(r["computed bits"] is not None for r in rows):
    cache.draw("quality_chart", rows, benchmark, key="quality_chart")
    st.caption("Each point is a row of the paper's table: its reported quality (y) against the bits per K/V element "
               "roofline computes for the same configuration on the catalogue model at the scenario's context (x). "
               "Dashed: the paper's uncompressed baseline.")
else:
    st.info("None of this benchmark's rows maps to a roofline SPEC on a catalogue model; the figures are below.")
st.dataframe(rows, hide_index=True, key="quality_table",
             column_order=["method", "value", "baseline", "paper memory", "spec", "computed bits",
                           "computed compression", "catalogue model", "source", "note"],
             column_config={"computed bits": st.column_config.NumberColumn(format="%.3f"),
                            "computed compression": st.column_config.NumberColumn(format="%.2fx")})
