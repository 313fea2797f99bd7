"""Pareto: the papers' quality figures against the memory and TPOT each method has on this scenario, with the SLO;
methods the chosen table has no figure for are listed apart, never given one."""

import streamlit as st
from roofline_app import cache, charts, loading

from roofline import report as fmt
from roofline.analysis import quality
from roofline.dashboard import explore, trust
from roofline.report import display

scenario = st.session_state["scenario"]
st.header("Pareto front")
benchmarks = quality.benchmarks()
default = benchmarks.index(quality.default_benchmark())
benchmark = st.selectbox("Quality figures (paper, table, model, dataset)", benchmarks, index=default,
                         key="benchmark")
plan, errors = cache.plan(scenario, cache.benchmark_specs(benchmark))
if plan is None:
    st.info("Nothing fits this scenario: see the Plan page's fit solver.")
    loading.stop()
rows = explore.pareto_rows(plan, benchmark, scenario.tpot_target_s)
with_figure = [r for r in rows if r["quality"] is not None]
if with_figure:
    st.image(charts.pareto_chart(rows, with_figure[0]["metric"], with_figure[0]["higher_is_better"]))
slo = f"TPOT target {scenario.tpot_target_s * 1e3:g} ms" if scenario.tpot_target_s else "no TPOT target (sidebar)"
st.caption(f"Quality is the paper's figure for the same SPEC (on the paper's model); memory and TPOT are computed on "
           f"this scenario; {slo}.")
cache.text_table(display.pareto_table(rows))
model, hardware, workload = cache.specs_of(scenario)
st.caption(fmt.md_escape(trust.page_caption("pareto", hardware, workload, model)
                         + " The quality figures are the papers' own (their model, their benchmark)."))
apart = [r["method"] for r in rows if r["quality"] is None]
if apart:
    st.caption("No figure in this table (shown apart, not on the chart): " + ", ".join(apart))
cache.downloads("pareto", rows, key="pareto")
