"""Side by side: pin the current scenario as A, change anything in the sidebar for B, and read both and the change."""

import streamlit as st
from roofline_app import cache, loading

from roofline import report as fmt
from roofline.dashboard import explore, trust
from roofline.report import display


def describe(s) -> str:
    model, hardware, w = cache.specs_of(s)
    return (f"{model.name} on {w.gpus} x {hardware.name} (tp {w.tp}, pp {w.pp}, weights {w.weight_dtype}), batch "
            f"{w.batch:,}, context {w.context_tokens:,}; methods {', '.join(s.specs)}")


scenario = st.session_state["scenario"]
st.header("Side by side")
if st.button("Pin the current scenario as A", key="pin"):
    st.session_state["pinned"] = scenario
pinned = st.session_state.get("pinned")
if pinned is None:
    st.info("Pin a scenario, then change anything in the sidebar (GPU, tp, methods, batch...) to compare with it.")
    loading.stop()
st.caption(fmt.md_escape(f"A (pinned): {describe(pinned)}"))
st.caption(fmt.md_escape(f"B (sidebar): {describe(scenario)}"))
plan_a, errors_a = cache.plan(pinned)
plan_b, errors_b = cache.plan(scenario)
lines = [f"{side}: {line}" for side, errors in (("A", errors_a), ("B", errors_b)) for line in errors]
errors_slot = st.empty()  # always there (one element): a B that plans again keeps the tables below in place
if lines:
    errors_slot.text("\n".join(lines))
if plan_a is None or plan_b is None:
    loading.stop()
rows = explore.diff_rows(plan_a, plan_b)
cache.text_table(display.diff_table(rows))
st.caption("change = (B - A) / A; '-' where a side lacks the method or A's value is unbounded.")
SHOWN = ("method", "max context @ batch", "max batch @ context", "TPOT", "tokens/s")
c1, c2 = st.columns(2)
for col, s, p in ((c1, pinned, plan_a), (c2, scenario, plan_b)):  # A left, B right
    with col:
        table = display.summary_table(p, cache.load("model", s.model).max_position_embeddings)
        cache.text_table([{k: r[k] for k in SHOWN} for r in table])
        m, hw, w = cache.specs_of(s)
        st.caption(fmt.md_escape(trust.page_caption("compare", hw, w, m)))
cache.downloads("side-by-side", rows, key="diff")
