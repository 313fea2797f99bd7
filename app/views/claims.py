"""Claims: each seed paper's headline claim, recomputed by the library, with a verdict decided by code."""

from collections import Counter

import streamlit as st
from roofline_app import cache

st.header("Claims")
st.caption("Each row quotes a paper, states what the computation assumes, and gives the value roofline computes "
           "now and the verdict (holds / holds only under stated assumptions / does not hold / not checkable).")
rows = cache.claims()
papers = list(dict.fromkeys(r["paper"] for r in rows))
chosen = st.multiselect("Papers", papers, default=papers, key="claims_papers")
shown = [r for r in rows if r["paper"] in chosen]
counts = Counter(r["verdict"] for r in shown)  # the counts follow the paper filter
cols = st.columns(max(len(counts), 1))
for col, (verdict, n) in zip(cols, sorted(counts.items()), strict=False):
    col.metric(verdict, n)
st.dataframe(cache.frame(shown), hide_index=True, lazy=False, key="claims_table", height=38 + 35 * min(len(shown), 20),
             column_order=["paper", "id", "verdict", "statement", "result"],
             column_config={"paper": st.column_config.TextColumn(width=70),
                            "id": st.column_config.TextColumn(width=170),
                            "verdict": st.column_config.TextColumn(width=250),
                            "statement": st.column_config.TextColumn(width=330),
                            "result": st.column_config.TextColumn("computed (unit)", width=300)})
st.caption("Hover a cell to read it whole; every claim's assumptions and the verdict's reason are in the expander "
           "below.")
# one expander for all the claims, filled only when opened (a rerun): the first visit mounts one element, not one
# expander and one text per claim (76 of them)
details = st.expander("Every claim: source, computed value, verdict's reason and assumptions", key="claims_details",
                      on_change="rerun")
if details.open:
    details.text("\n\n".join(
        f"{r['paper']} · {r['id']}: {r['verdict']}\n“{r['statement']}”\n{r['section']} ({r['seed']})\n"
        f"Computed: {r['computed']} {r['unit']}\nVerdict: {r['verdict']}: {r['detail']}\n"
        f"Assumptions: {r['assumptions']}"
        for r in shown))
cache.downloads("claims", shown, key="claims")
