"""Claims: each seed paper's headline claim, recomputed by the library, with a verdict decided by code."""

from collections import Counter

import streamlit as st
from roofline_app import cache

from roofline import report as fmt
from roofline.dashboard import trust

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
# a Markdown table (cache.text_table), not a data grid: the page's first visit loads no grid bundle (1.2 MB of JS)
cache.text_table([{"paper": r["paper"], "id": r["id"], "verdict": r["verdict"], "statement": r["statement"],
                   "computed (unit)": r["result"], "trust": trust.claim_cell(r)} for r in shown])
datasheet = next((r["trust"]["text"] for r in shown if r.get("trust")), None)
if datasheet:
    st.caption(fmt.md_escape(f"Trust: 'datasheet figures' marks a time or a rate, {datasheet}; 'exact count' marks "
                             "bytes, bits and tokens, which no ceiling enters."))
st.caption("Every claim's assumptions and the verdict's reason are in the expander below.")
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
