"""Validation: the cost model's predictions against the committed GPU measurements (validate/results/)."""

import streamlit as st
from roofline_app import cache, charts

from roofline import report as fmt
from roofline.dashboard import appdata, trust
from roofline.report import display

ENV_KEYS = ("device", "driver", "cuda", "torch", "triton", "python", "date", "git_sha")


def show(entry: dict) -> None:
    """One results file: its environment, summary metrics, chart, target and family tables, and (opened) every case."""
    if "error" in entry:
        st.error(fmt.md_escape(entry["error"]))
        return
    env, report = entry["env"], entry["report"]
    st.caption(fmt.md_escape(" · ".join(f"{k} {env[k]}" for k in ENV_KEYS if env.get(k) is not None)
                             + f" · compared with the {report['hardware']} spec"))
    summary = report["summary"]
    c1, c2, c3 = st.columns(3)
    c1.metric("cases compared (calibration excluded)", summary["cases"])
    c2.metric("median APE", "-" if summary["median_ape_pct"] is None else f"{summary['median_ape_pct']:.1f} %")
    c3.metric("90th percentile APE", "-" if summary["p90_ape_pct"] is None else f"{summary['p90_ape_pct']:.1f} %")
    rows = appdata.validation_rows(report)
    if any(r["predicted (ms)"] and r["measured (ms)"] for r in rows):
        st.image(charts.validation_chart(rows))
    cache.text_table(appdata.target_rows(entry["targets"]))
    cache.text_table(display.family_table(appdata.family_rows(report)))
    st.caption(f"Bandwidth fraction = achieved bytes/s over the {report['reference_source']} bandwidth "
               f"({fmt.tb_per_s(report['reference_bytes_per_s'])}). 'ceilings' calibrates the spec and is left "
               "out of the suite's APE.")
    cases = st.expander("Every case", key=f"cases_open_{entry['file']}", on_change="rerun")
    if cases.open:  # the 250-row table is computed and sent only when opened (a rerun)
        cases.dataframe(cache.frame(display.validation_table(rows)), hide_index=True, lazy=False,
                        key=f"cases_{entry['file']}")
    cache.downloads(entry["file"].removesuffix(".json") + "-cases", rows, key=f"dl_{entry['file']}")


st.header("Validation")
st.caption("Every kernel in validate/ is predicted from the hardware spec alone (no per-kernel fitting) and timed "
           "on a GPU; APE = |predicted - measured| / measured.")
st.subheader("What the validation supports")
cache.text_table(trust.bands_rows())
st.caption("Median absolute error per quantity ('N % under / over' where the errors share a sign) that the committed "
           "compare reports support: the real decoders and the real vLLM run on each device measured here, and the "
           "published vLLM runs per GPU group. Every number the other pages show carries the band of its source. "
           "'The measurement itself' is no model's error: how far the same served runs read apart on two leases of "
           "the same GPU, the floor under any band above.")
reports = cache.validation_reports()
if not reports:
    st.info("No validation results are committed yet (validate/results/*.json); run `python -m validate bench` on "
            "a GPU and commit the file.")

# one tab per results file, and only the open one runs and is sent (a tab click reruns): the first visit mounts one
# chart and two tables, not one set per GPU
if reports:
    tabs = st.tabs([entry["file"] for entry in reports], key="validation_file", on_change="rerun")
    for entry, tab in zip(reports, tabs, strict=True):
        if tab.open:
            with tab:
                show(entry)
