"""The dashboard's library side without Streamlit: query-string state, sweeps, the fit solver (against the CLI's
planner.parallel and planner.inversions), side-by-side and Pareto rows, display formatting, validation errors per
latency, the Roofline page's agreement between chart and limits, and the server's security settings."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import pytest

from roofline import report as fmt
from roofline.catalogue import load_hardware, load_model
from roofline.dashboard import appdata, explore, rooflinepage, share
from roofline.methods import parse_method
from roofline.planner import plan
from roofline.planner.inversions import max_batch_for_tpot, max_context_for_tpot
from roofline.planner.parallel import fewest_gpus, fits
from roofline.report import display

ROOT = Path(__file__).resolve().parents[2]
LLAMA8, H100 = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")


def test_query_string_round_trip_and_bad_values():
    state = {**share.defaults(), "hardware": "H200", "batch": 4, "methods": ["kivi-2", "bf16"], "utilization": 0.8}
    query = share.to_query(state)
    assert query == {"hardware": "H200", "batch": "4", "methods": "kivi-2,bf16", "utilization": "0.8"}
    assert share.from_query(query) == ({"hardware": "H200", "batch": 4, "methods": ["kivi-2", "bf16"],
                                        "utilization": 0.8}, [])
    parsed, errors = share.from_query({"batch": "0", "hardware": "[x](javascript:alert(1))", "methods": "nope",
                                       "context": "1e3", "unknown": "x"})
    assert parsed == {}
    assert [e.split(":")[1].strip() for e in errors] == ["batch", "hardware", "methods", "context"]
    assert share.workload_fields(share.defaults()) == {**appdata.WORKLOAD_DEFAULTS, "weight_dtype": "bf16",
                                                       "engine": "ideal", "host_speed": 1.0}  # Workload's defaults
    assert share.from_query({"host_speed": "0"})[1] == ["link: host_speed: 0.0 is outside [0.01, 100]"]


def test_sweep_equals_the_planner_at_the_scenario_point():
    workload = appdata.workload_from({})
    rows = explore.sweep(LLAMA8, H100, workload, ["bf16", "kivi-2"], "context")
    expected = plan(LLAMA8, H100, workload, [parse_method("bf16"), parse_method("kivi-2")])["results"]
    for r in expected:
        at = next(x for x in rows if x["method"] == r["method"] and x["context"] == workload.context_tokens)
        assert at["tpot_s"] == pytest.approx(r["tpot_s"], rel=1e-12)
        assert at["max_batch"] == r["max_batch"] and at["fits"] == r["fits"]
    contexts = [x["context"] for x in rows if x["method"] == "bf16"]
    assert contexts[-1] == LLAMA8.max_position_embeddings == 131_072 and contexts == sorted(contexts)
    gemma = load_model("Gemma-2-9B")
    assert explore.sweep_axis(gemma, workload, "context").max() == 8192  # never past the model's positions


def test_sweep_with_pipeline_stages_plans_each_point():
    workload = appdata.workload_from({"pp": 2})
    rows = explore.sweep(LLAMA8, H100, workload, ["bf16"], "batch")
    expected = plan(LLAMA8, H100, workload, [parse_method("bf16")])["results"][0]
    at = next(x for x in rows if x["batch"] == workload.batch)
    assert at["tpot_s"] == pytest.approx(expected["tpot_s"], rel=1e-12)


def test_fit_solver_gives_the_cli_answers():
    model, hardware = load_model("Llama-3.1-70B"), load_hardware("H200")
    workload = appdata.workload_from({})
    rows = explore.fit_solver(model, hardware, workload, ["bf16", "kivi-2"], tpot_target_s=0.05)
    for row in rows:
        method = parse_method(row["method"])
        assert row["fits"] is False and fits(model, hardware, workload, method) is False
        cli = fewest_gpus(model, hardware, workload, method)
        assert row["fewest"] == {k: cli[k] for k in ("gpus", "tp", "pp", "nodes")}
        assert row["sla"] == {"tpot_target_s": 0.05,
                              "max_context": max_context_for_tpot(model, hardware, cli["workload"], method, 0.05),
                              "max_batch": max_batch_for_tpot(model, hardware, cli["workload"], method, 0.05)}
        for dtype in ("bf16", "fp8", "int4"):
            trial = workload.model_copy(update={"weight_dtype": dtype})
            assert (dtype in row["weight dtypes that fit"]) == fits(model, hardware, trial, method)
    # 70B in bf16 is 131.4 GiB of weights: more than one H200's usable 0.9 x 139.8 GiB; fp8 halves it
    assert rows[1]["weight dtypes that fit"][:1] == ["fp8"]


def test_tpot_limits_equal_the_inversions_on_one_gpu():
    workload = appdata.workload_from({})
    for spec in ("bf16", "xquant-2"):
        got = explore.tpot_limits(LLAMA8, H100, workload, spec, 0.03)
        method = parse_method(spec)
        assert got["max_context"] == max_context_for_tpot(LLAMA8, H100, workload, method, 0.03)
        assert got["max_batch"] == max_batch_for_tpot(LLAMA8, H100, workload, method, 0.03)


def test_diff_and_pareto_rows():
    a = {"results": [{"method": "bf16", "max_context": 100.0, "max_batch": 10, "tpot_s": 0.02, "tokens_per_s": 800.0}]}
    b = {"results": [{"method": "bf16", "max_context": math.inf, "max_batch": 15, "tpot_s": 0.01,
                      "tokens_per_s": 1600.0}]}
    row = explore.diff_rows(a, b)[0]
    assert row["change max_batch"] == 0.5 and row["change tpot_s"] == -0.5 and row["change max_context"] is None
    bench = "XQuant Table 1: Llama-3.1-8B, WikiText-2 (perplexity)"
    p = plan(LLAMA8, H100, appdata.workload_from({}), [parse_method(s) for s in ("bf16", "xquant-2", "kivi-2")])
    rows = {r["method"]: r for r in explore.pareto_rows(p, bench, tpot_slo_s=0.05)}
    assert rows["xquant-2"]["quality"] == 7.74 and rows["xquant-2"]["paper_row"] == "XQuant-2bit"
    assert rows["bf16"]["quality"] is None and rows["bf16"]["on_front"] is False  # never given a figure
    assert rows["xquant-2"]["meets_slo"] is (rows["xquant-2"]["tpot_s"] <= 0.05)


def test_front_is_the_non_dominated_set():
    def r(name, mem, q):
        return {"method": name, "kv_bytes_per_sequence": mem, "quality": q, "higher_is_better": False,
                "meets_slo": True}
    rows = [r("a", 1, 9.0), r("b", 2, 8.0), r("c", 3, 8.5), r("d", 3, 7.0)]
    assert [not any(explore._dominates(o, x) for o in rows if o is not x) for x in rows] == [True, True, False, True]


def test_display_units_and_one_warning_per_text():
    p = plan(load_model("Gemma-2-9B"), H100, appdata.workload_from({"batch": 1, "context_tokens": 4096}),
             [parse_method("bf16"), parse_method("kivi-2")])
    table = display.summary_table(p, 8192)
    assert table[0]["max context @ batch"].startswith(">= 8,192 (model max")
    assert table[0]["TPOT"].endswith(" ms") and table[0]["KV / seq"].endswith(" GiB")
    assert all(isinstance(v, str) for row in table for v in row.values())
    lines = display.warning_lines(p)
    assert len(lines) == len(set(lines)) and all("positions" in x for x in lines)
    assert fmt.count(15_032_385_536) == "15,032,385,536" and fmt.number(837818181818.1804, 1) == "837,818,181,818.2"
    assert fmt.md_escape("![i](http://x/y.png) [a](javascript:1)") == (
        "\\!\\[i\\]\\(http\\:\\/\\/x\\/y\\.png\\) \\[a\\]\\(javascript\\:1\\)")


def test_roofline_limits_say_the_bound_the_chart_shows():
    workload = appdata.workload_from({})
    for context in (1024, 32_768):
        rows = rooflinepage.limits_rows(LLAMA8, H100, workload, ["xquant-2"], context)
        points = rooflinepage.roofline_data(LLAMA8, H100, workload, ("xquant-2",), context)["points"]
        attention = next(p for p in points if p["op"] == "attention")
        assert f"op attention on the chart: {attention['intensity']:,.0f} FLOP/B, {attention['bound']}-bound" in \
            rows[0]["at this context"]
        step = "memory-bound" if context <= rows[0]["value"] else "compute-bound"
        assert rows[0]["at this context"].startswith(f"step {step}")
    axes = rooflinepage.roofline_axes(LLAMA8, H100, workload, ("xquant-2",))
    for context in rooflinepage.context_options(workload.context_tokens):
        for p in rooflinepage.roofline_data(LLAMA8, H100, workload, ("xquant-2",), context)["points"]:
            assert axes["x_lo"] <= p["intensity"] <= axes["x_hi"] and axes["y_lo"] <= p["flops_per_s"] <= axes["y_hi"]


def test_server_binds_localhost_and_limits_uploads():
    for path in (ROOT / ".streamlit" / "config.toml", ROOT / "app" / ".streamlit" / "config.toml"):
        server = tomllib.loads(path.read_text())["server"]
        assert server["address"] == "127.0.0.1" and server["maxUploadSize"] == 1
        assert server["fileWatcherType"] == "none"  # no per-session scan of every module (load time)
    cmd = appdata.streamlit_command()
    assert cmd[cmd.index("--server.maxUploadSize") + 1] == "1"
    assert cmd[cmd.index("--server.fileWatcherType") + 1] == "none"


def test_rows_csv_and_json():
    rows = [{"method": "h2o", "max_context": math.inf, "nested": {"a": 1}}]
    assert appdata.rows_csv(rows) == "method,max_context,nested.a\nh2o,inf,1\n"
    assert json.loads(appdata.rows_json(rows))[0]["max_context"] == "inf"
