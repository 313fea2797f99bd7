"""The dashboard, driven headless by streamlit.testing's AppTest: every page renders without an exception element,
the numbers it shows equal the library's (called again here, outside the app), bad uploads give the inline one-line
error and keep the selection; and the library side (dashboard.appdata, analysis.quality) without Streamlit.

Render and interaction times are printed (run with -s to see them), not asserted."""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import sys
import time
from html import escape
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest

from roofline.analysis import quality
from roofline.catalogue import load_hardware, load_model
from roofline.catalogue.loading import MAX_SPEC_BYTES
from roofline.dashboard import appdata, explore, rooflinepage, share
from roofline.errors import SpecError
from roofline.methods import build_cache, parse_method
from roofline.planner import plan
from roofline.report import display

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
ROOT = Path(__file__).resolve().parents[2]
ENTRY = ROOT / "app" / "main.py"
TIMINGS: dict[str, float] = {}


def timed(label: str, at):
    start = time.perf_counter()
    at.run()
    TIMINGS[label] = time.perf_counter() - start
    return at


@pytest.fixture(scope="module", autouse=True)
def report_timings():
    yield
    lines = [f"  {label:<48} {seconds * 1e3:8.0f} ms" for label, seconds in TIMINGS.items()]
    text = "app render times (AppTest, this process):\n" + "\n".join(lines) + "\n"
    print("\n" + text)
    out = ROOT / "ci-artifacts"
    out.mkdir(exist_ok=True)
    (out / "app_timings.txt").write_text(text)


def fresh() -> AppTest:
    return AppTest.from_file(str(ENTRY), default_timeout=120)


def summary(plan_, model="Llama-3.1-8B", hardware="H100-SXM", by="tokens"):
    """The Plan page's table of the methods that fit as the library builds it (ranked, trust beside each row)."""
    from roofline.report import answer

    hw = load_hardware(hardware) if isinstance(hardware, str) else hardware
    answer.answer_plan(plan_, load_model(model), hw, by)
    return display.answer_tables(plan_, load_model(model).max_position_embeddings)[0]


def plain(text: str) -> str:
    """A Markdown-escaped line as the user reads it (report.md_escape undone)."""
    return re.sub(r"\\(.)", r"\1", text)


def no_exception(at) -> None:
    assert not at.exception, [e.value for e in at.exception]


def library_plan(hardware="H100-SXM", model="Llama-3.1-8B", specs=appdata.DEFAULT_METHODS, **fields):
    workload = appdata.workload_from(fields)
    return plan(load_model(model), load_hardware(hardware), workload, [parse_method(s) for s in specs])


def frame_equals(frame, rows) -> None:
    """A displayed dataframe against the library's rows: same columns, same values (floats to 1e-9)."""
    assert list(frame.columns) == list(rows[0])
    assert len(frame) == len(rows)
    for shown, row in zip(frame.to_dict("records"), rows, strict=True):
        for key, value in row.items():
            if isinstance(value, float):
                assert shown[key] == pytest.approx(value, rel=1e-9), key
            else:
                assert shown[key] == value, key


def markdown_tables(at) -> list:
    """Every Markdown table on the page (cache.text_table) as a pandas frame of its cells, backslash escapes read
    back to the characters (a cell is text as written, never Markdown)."""
    import pandas as pd

    def cells(line: str) -> list[str]:
        out, text, chars = [], "", iter(line.strip().removeprefix("|").removesuffix("|"))
        for c in chars:
            if c == "\\":
                text += next(chars)
            elif c == "|":
                out, text = [*out, text.strip()], ""
            else:
                text += c
        return [*out, text.strip()]

    frames = []
    for element in at.markdown:
        lines = element.value.split("\n")
        if len(lines) >= 2 and lines[0].startswith("| ") and re.fullmatch(r"\|(:?-+:?\|)+", lines[1]):
            frames.append(pd.DataFrame([cells(line) for line in lines[2:]], columns=cells(lines[0])))
    return frames


def table(at, column: str):
    """The first displayed dataframe or Markdown table with `column` (st.dataframe keys are not kept by AppTest)."""
    for frame in [f.value for f in at.dataframe] + markdown_tables(at):
        if column in frame.columns:
            return frame
    raise KeyError(f"no table with a {column!r} column")


def svg_images(at) -> list[str]:
    """Every st.image of the page (static SVG charts: roofline_app.charts) as SVG text."""
    out = []
    for element in at.main:
        if getattr(element, "type", None) == "image":
            head, data = element.value[0].split(",", 1)
            assert head == "data:image/svg+xml;base64"
            out.append(base64.b64decode(data).decode())
    return out


def svg_image(at) -> str:
    """The page's first chart."""
    return svg_images(at)[0]


def app_charts():
    sys.path.insert(0, str(ROOT / "app"))
    from roofline_app import charts

    return charts


@pytest.fixture(scope="module")
def app() -> AppTest:
    at = timed("first render (Plan, default scenario, cold)", fresh())
    no_exception(at)
    return at


# --- Plan page -----------------------------------------------------------------------------------------------


def test_plan_page_shows_the_library_plan(app):
    frame_equals(table(app, "TPOT avg"), summary(library_plan()))
    text = " ".join(m.value for m in app.caption)
    assert "Llama\\-3\\.1\\-8B" in text and "H100\\-SXM" in text  # Markdown-escaped names
    # the first paint (Summary) draws no chart: the charts have their own tabs, checked below
    assert not svg_images(app)
    expected, charts = library_plan(), app_charts()
    rows, first = appdata.summary_rows(expected), expected["results"][0]["memory"]
    max_positions = load_model("Llama-3.1-8B").max_position_embeddings
    memory = charts.memory_chart(appdata.memory_rows(expected), first["capacity_bytes"] / appdata.GIB,
                                 first["usable_bytes"] / appdata.GIB)
    for tab, drawn in (("Capacity", charts.capacity_chart(rows, max_positions)),
                       ("Latency", charts.latency_chart(rows)), ("Memory", (memory,))):
        app.session_state["plan_tab"] = tab  # only the open tab runs: each one draws its own chart
        app.run()
        no_exception(app)
        assert svg_images(app) == list(drawn), tab  # the library's plan drawn
    app.session_state["plan_tab"] = "Summary"  # back to the first paint for the tests that share this app
    app.run()
    frame_equals(table(app, "TPOT avg"), summary(library_plan()))
    assert app.get("download_button")


def test_plan_rerun_is_cached(app):
    timed("rerun, nothing changed (Plan)", app)
    no_exception(app)


def test_workload_change_replans(app):
    app.number_input(key="batch").set_value(4)
    app.number_input(key="context").set_value(65_536)
    app.button(key="apply").click()
    timed("apply batch 4, context 65,536 (5 new plans)", app)
    no_exception(app)
    expected = library_plan(batch=4, context_tokens=65_536)
    frame_equals(table(app, "TPOT avg"), summary(expected))
    app.session_state["plan_tab"] = "Memory"
    app.run()
    segments = appdata.memory_rows(expected)
    assert svg_image(app).count("</title></rect>") == len(segments)  # one bar segment per method and segment
    assert all(f"{escape(r['label'])}: {escape(r['segment'])} {r['GiB']:,.2f} GiB" in svg_image(app) for r in segments)
    app.session_state["plan_tab"] = "Summary"
    app.number_input(key="batch").set_value(16)
    app.number_input(key="context").set_value(32_768)
    app.button(key="apply").click()
    timed("apply back to the default workload (cached)", app)
    frame_equals(table(app, "TPOT avg"), summary(library_plan()))


def test_methods_custom_specs_and_a_bad_spec():
    at = fresh().run()
    at.multiselect(key="methods").set_value(["kivi-2"])
    at.text_area(key="custom").set_value("zack-50+kvquant-4; kivi:bits=99")
    at.button(key="apply").click()
    timed("apply methods kivi-2 + custom SPEC", at)
    no_exception(at)
    assert any("kivi:bits=99" in plain(e.value) and "bits" in plain(e.value) for e in at.sidebar.error)
    expected = library_plan(specs=["kivi-2", "zack-50+kvquant-4"])
    frame_equals(table(at, "TPOT avg"), summary(expected))


def test_bad_workload_keeps_the_last_valid_one():
    at = fresh().run()
    at.number_input(key="context").set_value(1000)
    at.number_input(key="generated").set_value(2000)
    at.button(key="apply").click().run()
    no_exception(at)
    assert any("generated_tokens" in plain(e.value) for e in at.sidebar.error)
    frame_equals(table(at, "TPOT avg"), summary(library_plan()))


def test_hardware_and_tp_change():
    at = fresh().run()
    at.selectbox(key="hardware").set_value("H200")
    timed("select hardware H200 (5 new plans)", at)
    at.selectbox(key="tp").set_value(2)
    at.button(key="apply").click().run()
    no_exception(at)
    frame_equals(table(at, "TPOT avg"), summary(library_plan("H200", tp=2), hardware="H200"))


def test_pipeline_stages_survive_a_smaller_model():
    at = fresh().run()
    at.number_input(key="pp").set_value(32)
    at.button(key="apply").click().run()
    no_exception(at)
    frame_equals(table(at, "TPOT avg"), summary(library_plan(pp=32)))
    at.selectbox(key="model").set_value("Llama-3.2-1B")
    timed("select a 16-layer model with pp = 32 set", at)
    no_exception(at)
    assert at.number_input(key="pp").value == 16
    frame_equals(table(at, "TPOT avg"), summary(library_plan(model="Llama-3.2-1B", pp=16), model="Llama-3.2-1B"))


def test_downloads_are_the_library_serializations(app):
    expected = library_plan()
    downloads = {b.proto.label: b for b in app.get("download_button")}
    assert set(downloads) == {"Download JSON", "Download CSV"}
    assert json.loads(appdata.plan_json(expected))["results"][0]["method"] == "bf16"


# --- uploads -------------------------------------------------------------------------------------------------


def upload(at, kind: str, name: str, content: bytes, label: str):
    at.session_state["upload_open"] = True  # the uploaders are drawn only when their expander is open
    at.run()
    at.get_by_key(f"{kind}_upload").set_value((name, content, "application/octet-stream"))
    return timed(label, at)


def test_valid_hardware_upload_becomes_the_selection():
    at = fresh().run()
    text = (ROOT / "hardware" / "H200.yaml").read_text().replace("name: H200", "name: my-H200")
    upload(at, "hardware", "mine.yaml", text.encode(), "upload a valid hardware YAML")
    no_exception(at)
    label = at.selectbox(key="hardware").value
    assert label.startswith("uploaded: my-H200 (mine.yaml, ") and len(label.split(", ")[-1]) == 9
    assert not at.sidebar.error
    assert "my\\-H200" in " ".join(m.value for m in at.caption)  # escaped: shown as text
    expected = library_plan("H200")
    rows = summary(expected, hardware=load_hardware("H200").model_copy(update={"name": "my-H200"}))
    frame_equals(table(at, "TPOT avg"), rows)


@pytest.mark.parametrize("name,content,fragment", [
    ("bad.yaml", b"name: [unclosed", "not valid YAML/JSON"),
    ("list.yaml", b"- 1\n- 2\n", "expected a mapping"),
    ("fields.yaml", b"name: x\nvendor: y\n", None),
    ("binary.yaml", b"\xff\xfe\x00bad", "not UTF-8"),
    ("huge.yaml", b"#" * (MAX_SPEC_BYTES + 1), "byte limit"),
    ("code.yaml", b"!!python/object/apply:os.system ['true']", "not valid YAML/JSON"),
])
def test_bad_hardware_upload_shows_one_line_and_keeps_the_selection(name, content, fragment):
    at = fresh().run()
    upload(at, "hardware", name, content, f"upload a bad hardware file ({name})")
    no_exception(at)
    errors = [plain(e.value) for e in at.sidebar.error]
    assert len(errors) == 1 and "\n" not in errors[0] and name in errors[0]
    assert fragment is None or fragment in errors[0]
    assert at.selectbox(key="hardware").value == "H100-SXM"
    frame_equals(table(at, "TPOT avg"), summary(library_plan()))


def test_model_uploads_hf_config_then_a_bad_file_keeps_it():
    at = fresh().run()
    config = (ROOT / "tests" / "data" / "hf" / "Llama-3.2-1B" / "config.json").read_bytes()
    upload(at, "model", "config.json", config, "upload a Hugging Face config.json")
    no_exception(at)
    chosen = at.selectbox(key="model").value
    assert chosen.startswith("uploaded: ") and "(config.json, " in chosen
    model = appdata.spec_from_text("model", config.decode(), "config.json")
    workload = appdata.workload_from({})
    expected = plan(model, load_hardware("H100-SXM"), workload, [parse_method(s) for s in appdata.DEFAULT_METHODS])
    from roofline.report import answer

    answer.answer_plan(expected, model, load_hardware("H100-SXM"))
    shown = table(at, "TPOT avg")
    ranked = display.answer_tables(expected, model.max_position_embeddings)[0]
    assert list(shown["TPOT"]) == [r["TPOT"] for r in ranked] and list(shown["#"])[0] == "1 (best)"
    upload(at, "model", "broken.json", b'{"model_type": "llama",', "upload a broken config.json")
    no_exception(at)
    assert any("broken.json" in plain(e.value) and "not valid JSON" in plain(e.value) for e in at.sidebar.error)
    assert at.selectbox(key="model").value == chosen


def test_model_upload_after_a_refused_file_reads_the_new_file():
    """The browser's model uploader takes several files (a config.json with its hf_quant_config.json) and keeps every
    file dropped on it, a refused one too (seen in Chromium, session 28: validate/notes/2026-11-30-new-user-28.md):
    a good config.json dropped after a bad file arrived beside it and was refused as a second spec ('upload one spec
    or config.json ...'). Now the files just dropped are read alone when the whole set is refused."""
    at = fresh().run()
    upload(at, "model", "bad.json", b"[1, 2]", "upload a config.json that is a list")
    no_exception(at)
    assert any("bad.json" in plain(e.value) for e in at.sidebar.error)
    assert at.selectbox(key="model").value == "Llama-3.1-8B"
    config = (ROOT / "tests" / "data" / "hf" / "Trinity-Nano-Preview" / "config.json").read_bytes()
    at.get_by_key("model_upload").set_value([("bad.json", b"[1, 2]", "application/json"),
                                             ("config.json", config, "application/json")])
    timed("upload a good config.json beside the refused file", at)
    no_exception(at)
    chosen = at.selectbox(key="model").value
    assert chosen.startswith("uploaded: ") and "(config.json, " in chosen and "bad.json" not in chosen
    assert not at.sidebar.error
    assert appdata.load_source("model", at.session_state["model_uploads"][chosen]).moe.num_experts == 128


def test_model_upload_of_a_modelopt_pair_plans_its_quantization():
    """nvidia/Llama-3.1-70B-Instruct-FP8 keeps its quantization only in hf_quant_config.json (quant_algo FP8,
    kv_cache_quant_algo FP8): uploaded with its config.json the model is FP8 with an FP8 KV cache, as the CLI reads a
    checkpoint folder; the config.json alone is bf16 (nothing in it says otherwise); the settings alone are refused
    in one line."""
    folder = ROOT / "tests" / "data" / "hf" / "Llama-3.1-70B-Instruct-FP8"
    config, quant = (folder / "config.json").read_bytes(), (folder / "hf_quant_config.json").read_bytes()
    settings = json.loads(quant)["quantization"]
    assert (settings["quant_algo"], settings["kv_cache_quant_algo"]) == ("FP8", "FP8")
    at = fresh().run()
    at.session_state["upload_open"] = True
    at.run()
    at.get_by_key("model_upload").set_value([("config.json", config, "application/json"),
                                             ("hf_quant_config.json", quant, "application/json")])
    timed("upload config.json with hf_quant_config.json", at)
    no_exception(at)
    chosen = at.selectbox(key="model").value
    assert "(config.json + hf_quant_config.json, " in chosen and not at.sidebar.error
    model = appdata.load_source("model", at.session_state["model_uploads"][chosen])
    assert (model.quantization.weight_dtype, model.quantization.kv_cache_dtype) == ("fp8", "fp8")
    # planned at its stored widths, as `roofline plan` plans the checkpoint folder: the caption says fp8 weights
    caption = " ".join(plain(c.value) for c in at.caption)
    assert "weights fp8" in caption and "weights bf16" not in caption
    alone = appdata.load_source("model", appdata.upload_pair([("config.json", config)]))
    assert alone.quantization is None
    with pytest.raises(SpecError, match="upload one spec or config.json"):
        appdata.upload_pair([("hf_quant_config.json", quant)])
    with pytest.raises(SpecError, match="goes with a Hugging Face config.json"):
        appdata.upload_pair([("m.yaml", b"name: x"), ("hf_quant_config.json", quant)])


# --- other pages ---------------------------------------------------------------------------------------------


def test_roofline_page_points_and_limits():
    charts = app_charts()
    at = fresh().run()
    at.switch_page("views/roofline_page.py")
    timed("switch to Roofline", at)
    no_exception(at)
    specs = tuple(at.multiselect(key="roofline_methods").value)
    assert "aquakv-2" in specs and set(appdata.DEFAULT_METHODS) <= set(specs)
    model, hardware, workload = load_model("Llama-3.1-8B"), load_hardware("H100-SXM"), appdata.workload_from({})
    for context, label in ((32_768, None), (4096, "roofline slider to 4Ki (new context)"),
                           (32_768, "roofline slider back to 32Ki (cached)")):
        if label:
            at.select_slider(key="roofline_context").set_value(context)
            timed(label, at)
            no_exception(at)
        data = rooflinepage.roofline_data(model, hardware, workload, specs, context)
        axes = rooflinepage.roofline_axes(model, hardware, workload, specs)
        svg = svg_image(at)
        assert svg == charts.roofline_chart(data, axes)  # the library's ops on the library's fixed axes
        assert svg.count(" FLOP/byte, ") == len(data["points"])  # one mark per op
        assert all(f"{escape(p['method'])} · {escape(p['op'])} (" in svg for p in data["points"])
        frame_equals(table(at, "limit"),
                     display.limits_table(rooflinepage.limits_rows(model, hardware, workload, specs, context)))
        frame = [line for line in svg.split("\n") if 'stroke="#eee"' in line or 'stroke="black" stroke-dash' in line]
        if label is None:
            first = frame
        assert frame == first  # grid, ticks and ceilings stay put while the slider moves the ops


def test_side_by_side_pins_a_and_diffs_b():
    at = fresh().run()
    at.switch_page("views/compare.py")
    timed("switch to Side by side", at)
    at.button(key="pin").click()
    timed("pin scenario A", at)
    at.selectbox(key="hardware").set_value("H200")
    timed("B: select hardware H200", at)
    no_exception(at)
    expected = explore.diff_rows(library_plan(), library_plan("H200"))
    frame_equals(table(at, "TPOT change"), display.diff_table(expected))
    assert any(r["change tpot_s"] < 0 for r in expected)  # H200's 4.8 TB/s against 3.35: memory-bound steps faster


def test_sweeps_page_is_the_library_sweep():
    charts = app_charts()
    at = fresh().run()
    at.switch_page("views/sweeps.py")
    timed("switch to Sweeps", at)
    no_exception(at)
    model, hardware = load_model("Llama-3.1-8B"), load_hardware("H100-SXM")
    for axis in ("context", "batch"):
        rows = explore.sweep(model, hardware, appdata.workload_from({}), appdata.DEFAULT_METHODS, axis)
        marks = explore.sweep_marks(model, library_plan(), axis)
        svg = svg_image(at)
        assert svg == charts.sweep_chart(rows, marks, axis, "tpot_s", None)  # the library's sweep, drawn
        assert svg.count("</title></circle>") == len(rows) and svg.count("<polyline") == len(appdata.DEFAULT_METHODS)
        assert ("Llama-3.1-8B max positions" in svg) == (axis == "context")
        if axis == "context":
            assert max(r["context"] for r in rows) == model.max_position_embeddings
            at.radio(key="sweep_axis").set_value("batch")
            timed("sweep against batch", at)
            no_exception(at)


def test_sweep_svg_places_points_on_its_axes():
    sys.path.insert(0, str(ROOT / "app"))
    from roofline_app import svgchart

    points = [svgchart.Point(10.0, 1.0, True, "a <b>"), svgchart.Point(1000.0, 100.0, False, "c")]
    svg = svgchart.line_chart([svgchart.Series("m & n", points)], title="t", subtitle="s", x_title="x",
                              y_title="y", x_log=True, y_log=True, vrules=[svgchart.Rule(100.0, "black", "r")])
    x = svgchart.Axis([10.0, 1000.0, 100.0], True, 64, 820 - 230)
    y = svgchart.Axis([1.0, 100.0], True, 420 - 46, 58)
    circles = re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"[^>]* fill="([^"]+)"><title>([^<]*)</title>', svg)
    assert [(float(cx), float(cy), fill != "white", tip) for cx, cy, fill, tip in circles] == [
        (pytest.approx(x.px(p.x), abs=0.05), pytest.approx(y.px(p.y), abs=0.05), p.filled, escape(p.tip))
        for p in points]
    assert x.px(100.0) == pytest.approx((x.px(10.0) + x.px(1000.0)) / 2)  # log axis: a decade per equal step
    assert "m &amp; n" in svg and "<b>" not in svg
    assert svgchart.si(131072) == "131k" and svgchart.si(0.0005) == "500µ" and svgchart.si(2000) == "2k"


def test_pareto_page_lists_methods_without_figures_apart():
    at = fresh().run()
    at.switch_page("views/pareto.py")
    timed("switch to Pareto", at)
    no_exception(at)
    shown = table(at, "on the front")
    missing = shown[shown["quality (paper)"] == "no figure in this table"]
    assert "bf16" in list(missing["method"]) or len(missing) == 0
    assert any("No figure" in c.value for c in at.caption) == (len(missing) > 0)
    drawn = [m for m in shown["method"] if m not in set(missing["method"])]  # one mark per method with a figure
    svg = svg_image(at)
    assert all(f"<title>{escape(m)} (" in svg for m in drawn) and svg.count("<title>") == len(drawn)


def test_model_that_does_not_fit_gets_the_fit_solver_not_a_wall_of_errors():
    at = fresh().run()
    at.selectbox(key="hardware").set_value("H200")
    at.selectbox(key="model").set_value("Llama-3.1-70B")
    timed("select Llama-3.1-70B on one H200 (fit solver)", at)
    no_exception(at)
    assert len(at.error) == 1 and "none of the methods" in at.error[0].value  # the answer first
    assert len(at.warning) == 1 and "do not fit" in at.warning[0].value
    model, hardware = load_model("Llama-3.1-70B"), load_hardware("H200")
    expected = explore.fit_solver(model, hardware, appdata.workload_from({}), appdata.DEFAULT_METHODS)
    frame_equals(table(at, "fewest GPUs (tp x pp)"), display.fit_table(expected))


def test_a_shared_link_reproduces_the_scenario():
    at = fresh()
    at.query_params.update({"hardware": "H200", "batch": "4", "tp": "2", "methods": "kivi-2,bf16",
                            "weight_dtype": "fp8", "context": "oops"})
    timed("open a shared link", at)
    no_exception(at)
    assert any("context" in w.value for w in at.sidebar.warning)  # the bad value named, the default kept
    expected = library_plan("H200", specs=["kivi-2", "bf16"], batch=4, tp=2, weight_dtype="fp8")
    frame_equals(table(at, "TPOT avg"), summary(expected, hardware="H200"))
    assert share.from_query(at.query_params)[0] == {"hardware": "H200", "batch": 4, "tp": 2,
                                                    "methods": ["kivi-2", "bf16"], "weight_dtype": "fp8"}


def test_a_gguf_preset_under_llamacpp_plans_its_per_tensor_types():
    at = fresh()
    at.query_params.update({"hardware": "H200", "batch": "4", "methods": "bf16", "engine": "llamacpp",
                            "weight_dtype": "gguf:Q4_K_M"})
    timed("open a GGUF link", at)
    no_exception(at)
    expected = library_plan("H200", specs=["bf16"], batch=4, engine="llamacpp", weight_dtype="gguf:Q4_K_M")
    frame_equals(table(at, "TPOT avg"), summary(expected, hardware="H200"))
    # under vLLM the same preset is refused in one line naming the field, no traceback
    at = fresh()
    at.query_params.update({"hardware": "H200", "methods": "bf16", "engine": "vllm", "weight_dtype": "gguf:Q4_K_M"})
    timed("open a GGUF link under vLLM", at)
    no_exception(at)
    shown = [e.value.replace("\\", "") for e in at.error]  # markdown-escaped as drawn
    assert any("weight_dtype: gguf:Q4_K_M is a llama.cpp GGUF file type" in e for e in shown)


def test_validation_page_matches_compare():
    at = fresh().run()
    at.switch_page("views/validation.py")
    timed("switch to Validation", at)
    no_exception(at)
    files = appdata.results_files()
    if not files:
        assert any("No validation results" in i.value for i in at.info)
        return
    entry = appdata.validation_report(files[0])
    report = entry["report"]
    metrics = {}
    for m in at.metric:  # the first file's metrics come first
        metrics.setdefault(m.label, m.value)
    assert metrics["cases compared (calibration excluded)"] == str(report["summary"]["cases"])
    assert metrics["median APE"] == f"{report['summary']['median_ape_pct']:.1f} %"
    frame_equals(table(at, "median bandwidth fraction"), display.family_table(appdata.family_rows(report)))
    frame_equals(table(at, "target"), appdata.target_rows(entry["targets"]))
    rows = appdata.validation_rows(report)
    drawn = sum(1 for r in rows if r["predicted (ms)"] and r["measured (ms)"])
    assert svg_image(at).count("</title></circle>") == drawn  # one mark per case with both times
    assert {r["verdict"] for r in appdata.target_rows(entry["targets"])} <= {"met", "missed", "not measured"}
    assert not any("case" in f.value.columns for f in at.dataframe)  # "Every case" runs only when opened
    at.session_state[f"cases_open_{files[0].name}"] = True
    at.run()
    frame_equals(table(at, "case"), display.validation_table(appdata.validation_rows(report)))


def test_validation_page_without_results(monkeypatch):
    monkeypatch.setattr(appdata, "results_files", lambda results_dir=None: [])
    at = fresh().run()
    at.switch_page("views/validation.py").run()
    no_exception(at)
    assert any("No validation results are committed yet" in i.value for i in at.info)


def test_claims_page_is_the_claims_table():
    at = fresh().run()
    at.switch_page("views/claims.py")
    timed("switch to Claims (first: recomputes every claim)", at)
    no_exception(at)
    rows = appdata.claims_rows()
    shown = table(at, "verdict")
    assert list(shown["id"]) == [r["id"] for r in rows]
    assert list(shown["verdict"]) == [r["verdict"] for r in rows]
    counts = {m.label: m.value for m in at.metric}
    for verdict in {r["verdict"] for r in rows}:
        assert counts[verdict] == str(sum(r["verdict"] == verdict for r in rows))
    paper = rows[0]["paper"]
    at.multiselect(key="claims_papers").set_value([paper])
    timed("filter Claims to one paper", at)
    counts = {m.label: m.value for m in at.metric}
    mine = [r for r in rows if r["paper"] == paper]
    assert counts == {v: str(sum(r["verdict"] == v for r in mine)) for v in {r["verdict"] for r in mine}}


# --- library side, without Streamlit -------------------------------------------------------------------------


def test_app_path_and_command_bind_localhost():
    assert appdata.app_path() == ENTRY
    cmd = appdata.streamlit_command(port=8765)
    assert cmd[1:4] == ["-m", "streamlit", "run"] and cmd[4] == str(ENTRY)
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.port") + 1] == "8765"


def test_plan_csv_and_json():
    p = library_plan(specs=["bf16", "h2o-2048"])
    rows = list(csv.DictReader(io.StringIO(appdata.plan_csv(p))))
    assert [r["method"] for r in rows] == ["bf16", "h2o-2048"]
    assert float(rows[0]["memory.weights_bytes"]) == p["results"][0]["memory"]["weights_bytes"]
    assert rows[1]["max_context"] == "inf" and rows[0]["workload.batch"] == "16"
    data = json.loads(appdata.plan_json(p))
    assert data["results"][1]["max_context"] == "inf"
    assert data["results"][0]["max_batch"] == p["results"][0]["max_batch"]


def test_upload_parsing_errors_are_one_line():
    with pytest.raises(SpecError, match="byte limit"):
        appdata.upload_source("x.yaml", b"a" * (MAX_SPEC_BYTES + 1))
    with pytest.raises(SpecError, match="not UTF-8"):
        appdata.upload_source("x.yaml", b"\xff")
    with pytest.raises(SpecError, match="expected a JSON object"):
        appdata.spec_from_text("model", "[1, 2]", "config.json")
    with pytest.raises(SpecError) as err:
        appdata.spec_from_text("hardware", "name: x\n", "h.yaml")
    assert "\n" not in str(err.value) and str(err.value).startswith("h.yaml: ")
    source = appdata.upload_source("h.yaml", (ROOT / "hardware" / "L4.yaml").read_bytes())
    assert appdata.load_source("hardware", source) == load_hardware("L4")


def test_workload_and_spec_helpers():
    assert appdata.workload_from({"pp": 4, "batch": 2}).micro_batches == 2
    with pytest.raises(SpecError, match="generated_tokens"):
        appdata.workload_from({"context_tokens": 10, "generated_tokens": 10})
    assert appdata.split_specs("kivi:bits=3,group_size=64; xquant-2\nzack-50+kvquant-4\n") == [
        "kivi:bits=3,group_size=64", "xquant-2", "zack-50+kvquant-4"]
    with pytest.raises(SpecError):
        appdata.check_spec("nonsense-7")
    assert rooflinepage.context_options(3000)[:3] == [128, 256, 512] and 3000 in rooflinepage.context_options(3000)


def quoted(notes: str, names: set[str], value: float) -> bool:
    """`value` is a cell of a markdown table row of `notes` that names one of `names` (method or model)."""
    cells = {f"{value:g}", f"{value:.2f}", f"{value:.1f}", f"{value:.3f}"}
    for line in notes.splitlines():
        if line.startswith("|") and any(n in line for n in names):
            if cells & {c.strip().strip("*") for c in line.split("|")}:
                return True
    return False


def test_quality_figures_are_quoted_from_the_notes():
    """Every figure's value and baseline are cells of a table row of its paper's notes that names its method or
    model (InnerQ Table 2's means are computed from quoted cells instead), and every SPEC builds on its model."""
    notes = {paper: (ROOT / path).read_text() for paper, path in quality.DOCS.items()}
    for f in quality.figures():
        if f.paper == "InnerQ" and f.table == "Table 2":
            continue
        names = {re.sub(r"-\d+bit(-1%)?$", "", f.method), f.model}
        assert quoted(notes[f.paper], names, f.value), (f.benchmark, f.method, f.value)
        assert f.baseline is None or quoted(notes[f.paper], {f.model, "Baseline", "baseline", "Uncompressed",
                                                             "FP16"}, f.baseline), (f.benchmark, f.baseline)
    for spec, model in {(f.spec, f.catalogue_model) for f in quality.figures() if f.spec}:
        assert build_cache(parse_method(spec), load_model(model)).effective_bits() is not None


def test_quality_benchmarks_and_innerq_means():
    assert len(quality.benchmarks()) == len(set(quality.benchmarks())) > 20
    assert quality.innerq_longbench_mean(0) == pytest.approx((44.58 + 34.61 + 26.95 + 39.50 + 91.64 + 43.57
                                                              + 43.02 + 38.26) / 8, abs=1e-4)
    rows = appdata.quality_rows("XQuant Table 1: Llama-3.1-8B, WikiText-2 (perplexity)", 32_768)
    xq2 = next(r for r in rows if r["method"] == "XQuant-2bit")
    assert xq2["value"] == 7.74 and xq2["baseline"] == 6.24 and xq2["computed bits"] == pytest.approx(2.25)
    with pytest.raises(ValueError, match="benchmark"):
        quality.for_benchmark("nope")


def test_serving_page_draws_latency_curves_and_the_max_rate():
    at = fresh().run()
    at.switch_page("views/serving.py").run()
    no_exception(at)
    at.number_input(key="srv_prompt").set_value(1024)
    at.number_input(key="srv_output").set_value(64)
    at.number_input(key="srv_requests").set_value(50)
    next(b for b in at.button if b.label == "Simulate").click()
    timed("serving: simulate 5 methods x 8 rates (50 requests)", at)
    no_exception(at)
    assert not at.error
    best = table(at, "max requests/s at the SLO")
    assert list(best["method"]) == list(appdata.DEFAULT_METHODS)
    ttft, tpot = svg_images(at)  # TTFT and TPOT p99 against the rate, one line per method
    assert ttft.count("<polyline") == tpot.count("<polyline") == len(appdata.DEFAULT_METHODS)
    # at 5 % of saturation 1,088-token requests keep the GEMMs busy far less than half the time (serving.clock)
    assert any("burst clock" in c.value for c in at.caption)


def test_roofline_page_data_is_kept_by_content():
    model, hardware, workload = load_model("Llama-3.1-8B"), load_hardware("H100-SXM"), appdata.workload_from({})
    specs = ("kivi-2", "aquakv-2")
    direct = rooflinepage.limits_rows(model, hardware, workload, specs, 4096)
    assert json.loads(json.dumps(rooflinepage.kept("limits_rows", model, hardware, workload, specs, 4096))) == direct
    data = rooflinepage.kept("roofline_data", model, hardware, workload, specs, 4096)
    assert data["points"] == rooflinepage.roofline_data(model, hardware, workload, specs, 4096)["points"]
    other = rooflinepage.kept("roofline_data", model, hardware, appdata.workload_from({"batch": 2}), specs, 4096)
    assert other["batch"] == 2 and other["points"] != data["points"]  # the workload is part of the key
    with pytest.raises(ValueError, match="name"):
        rooflinepage.kept("plan", model, hardware, workload, specs)


def test_catalogue_specs_are_kept_by_content():
    for kind, name, load in (("hardware", "H200", load_hardware), ("model", "Llama-3.1-70B", load_model)):
        assert appdata.catalogue_spec(kind, name) == load(name)  # validated again from the kept JSON: equal
    assert appdata.load_source("hardware", appdata.catalogue_source("L4")) == load_hardware("L4")


def test_arrow_tables_from_buffers_equal_pyarrows():
    import sys

    sys.path.insert(0, str(ROOT / "app"))
    from roofline_app import arrow

    rows = [{"method": "bf16", "bits": 16.0, "max": 27_856, "fits": False, "note": None, "n": None},
            {"method": "kivi-2 ünïcode", "bits": None, "max": 2, "fits": True, "note": "x", "n": None},
            {"method": "", "bits": 3, "max": None, "fits": None, "note": "yz", "n": None}]
    built = arrow.table(rows)
    assert built.equals(pa.Table.from_pylist(rows)) and built.to_pylist() == rows
    for name, plan_rows in (("summary", display.summary_table(library_plan(), 131_072)),
                            ("memory", appdata.memory_rows(library_plan()))):
        assert arrow.table(plan_rows).equals(pa.Table.from_pylist(plan_rows)), name
    assert arrow.table([{"a": 1}, {"a": "text"}]) is None  # a mixed column: the caller falls back
    assert arrow.table([{"a": 1}, {"b": 1}]) is None  # different columns


def test_markdown_tables_show_cells_as_text():
    sys.path.insert(0, str(ROOT / "app"))
    from roofline_app.cache import markdown_table

    hostile = ["[x](javascript:alert(1))", "![i](http://example.com/i.png)", "a | b", "<b>x</b>\nline", "\\", "*y*"]
    rows = [{"method": name, "TPOT": "1.00 ms"} for name in hostile]
    text = markdown_table(rows)
    assert len(text.split("\n")) == 2 + len(rows)  # a newline in a cell never starts a row
    assert "](" not in text and "<b>" not in text and " | b" not in text
    shown = markdown_tables(SimpleNamespace(markdown=[SimpleNamespace(value=text)]))[0]
    assert shown.to_dict("records") == [{"method": " ".join(r["method"].split()), "TPOT": "1.00 ms"} for r in rows]


def test_sweep_rows_are_kept_by_content():
    model, hardware, workload = load_model("Llama-3.1-8B"), load_hardware("H100-SXM"), appdata.workload_from({})
    for axis in ("context", "batch"):
        direct = explore.sweep(model, hardware, workload, ("bf16", "kivi-2"), axis)
        kept = explore.sweep_kept(model, hardware, workload, ("bf16", "kivi-2"), axis)
        assert kept == direct and appdata.rows_csv(kept) == appdata.rows_csv(direct)  # the page's download


def test_warmup_waits_while_any_script_runs(monkeypatch) -> None:
    # two overlapping runs (two sessions): the warm-up stops at the first hold and goes on only after the last
    # release; the stand-in is this process's child, so waitpid reports each stop and continue (POSIX)
    import os
    import subprocess

    sys.path.insert(0, str(ROOT / "app"))
    from roofline_app import cache

    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(cache, "WARMUP", [proc])
    monkeypatch.setitem(cache._HOLDS, "runs", 0)

    def change(flags: int, wait_s: float = 5.0) -> int | None:
        """The child's next reported state change under `flags` within wait_s (None: none)."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            pid, status = os.waitpid(proc.pid, flags | os.WNOHANG)
            if pid:
                return status
            time.sleep(0.01)
        return None

    try:
        cache.hold_warmup()
        cache.hold_warmup()
        assert os.WIFSTOPPED(change(os.WUNTRACED))
        cache.release_warmup()
        assert change(os.WCONTINUED, 0.3) is None and cache._HOLDS["runs"] == 1  # one run still holds it
        cache.release_warmup()
        assert os.WIFCONTINUED(change(os.WCONTINUED)) and cache._HOLDS["runs"] == 0
    finally:
        proc.kill()
        proc.wait()


# --- the answer first (issue 32) -----------------------------------------------------------------------------


def test_serving_inputs_travel_in_the_link():
    at = fresh()
    at.query_params.update({"srv_prompt": "1024", "srv_ttft": "1500"})
    at.run()
    at.switch_page("views/serving.py").run()
    no_exception(at)
    assert at.number_input(key="srv_prompt").value == 1024 and at.number_input(key="srv_ttft").value == 1500.0
    at.number_input(key="srv_output").set_value(64)
    next(b for b in at.button if b.label == "Simulate").click()
    at.switch_page("views/plan.py").run()  # the Serving widgets are gone from this page: the link keeps them
    state = share.from_query(at.query_params)[0]
    assert state["srv_prompt"] == 1024 and state["srv_output"] == 64 and state["srv_ttft"] == 1500.0


def test_a_link_value_the_model_cannot_take_is_said_not_silently_changed():
    at = fresh()
    at.query_params.update({"tp": "3", "model": "Llama-3.2-1B", "pp": "4096"})
    at.run()
    no_exception(at)
    warnings = " ".join(plain(w.value) for w in at.sidebar.warning)
    assert "tp: 3 does not divide" in warnings and "pp: 4,096 exceeds the model's 16 layers" in warnings


def test_an_uploaded_spec_says_it_cannot_travel_in_a_link():
    at = fresh().run()
    text = (ROOT / "hardware" / "H200.yaml").read_text().replace("name: H200", "name: my-H200")
    upload(at, "hardware", "mine.yaml", text.encode(), "upload for the link note")
    assert any("cannot travel in a link" in plain(i.value) for i in at.sidebar.info)
    assert "hardware" not in at.query_params


def test_compare_all_methods_and_best_by_context():
    at = fresh().run()
    at.button(key="all_methods").click().run()
    no_exception(at)
    model = load_model("Llama-3.1-8B")
    assert at.multiselect(key="methods").value == appdata.applicable_presets(model)
    success = plain(at.success[0].value)
    expected = library_plan(specs=appdata.applicable_presets(model))
    frame_equals(table(at, "TPOT avg"), summary(expected))
    assert f"best by most tokens/s at the batch and context: {expected['answer']['best']} " in success
    not_fit = table(at, "fits")  # the first table with a fits column is the ranked one: every row fits
    assert all(v == "yes" for v in not_fit["fits"])
    at.session_state["best_by"] = "context"
    at.run()
    frame_equals(table(at, "TPOT avg"), summary(library_plan(specs=appdata.applicable_presets(model)), by="context"))


def test_a_quantized_checkpoint_is_planned_at_its_stored_widths_as_the_cli_plans_it():
    """Qwen3-30B-A3B-FP8's config.json carries quantization_config (fp8 blocks): with the weight dtype at its bf16
    default the dashboard plans it at its stored widths, as `roofline plan --model .../config.json` does. By hand:
    30.5 B parameters at one byte (fp8) plus bf16 embeddings / head and the block scales is ~31 GB, far under the
    ~61 GB of bf16; the plan's weights per GPU equal the CLI's JSON."""
    import subprocess

    path = ROOT / "tests" / "data" / "hf" / "Qwen3-30B-A3B-FP8" / "config.json"
    model = appdata.spec_from_text("model", path.read_text(), "config.json")
    workload = appdata.model_workload(model, {"tp": 1})
    assert workload.weight_dtype == "fp8"
    row = appdata.method_result(model, load_hardware("H100-SXM"), workload, "bf16")
    cli = subprocess.run([sys.executable, "-m", "roofline.cli", "plan", "--model", str(path), "--method", "bf16",
                          "--json"], capture_output=True, text=True, cwd=ROOT, check=True)
    by_cli = json.loads(cli.stdout)["results"][0]
    assert row["memory"]["weights_bytes"] == by_cli["memory"]["weights_bytes"]
    assert 28e9 < row["memory"]["weights_bytes"] < 34e9
    bf16 = appdata.method_result(model, load_hardware("H100-SXM"), appdata.workload_from({"tp": 1}), "bf16")
    assert bf16["memory"]["weights_bytes"] > 55e9  # what the dashboard planned before


# --- host speed (the CLI's --host-speed, roofline.engines.timing mechanism 11) -------------------------------------

HOST_SMALL = {"batch": 1, "context_tokens": 2048, "generated_tokens": 256}  # a 1B model at batch 1: host-bound steps


def _host_app(engine: str, speed: float) -> AppTest:
    at = fresh().run()
    at.selectbox(key="model").set_value("Llama-3.2-1B").run()
    at.multiselect(key="methods").set_value(["bf16"])
    at.number_input(key="batch").set_value(1)
    at.number_input(key="context").set_value(2048)
    at.number_input(key="generated").set_value(256)
    at.selectbox(key="engine").set_value(engine)
    at.number_input(key="host_speed").set_value(speed)
    at.button(key="apply").click()
    timed(f"plan under {engine} at host speed {speed:g}", at)
    no_exception(at)
    return at


def test_host_speed_sits_beside_the_engine_with_the_clis_bound_and_calibration(capsys):
    """The box's top is the highest --host-speed the CLI takes (100 is taken, 100.01 refused with exit 2 naming the
    argument); its help names the calibration (16.63 ms over the tiny server's TTFT at concurrency 1)."""
    from cli_run import run

    at = fresh().run()
    box = at.number_input(key="host_speed")
    assert box.value == 1.0 and 0 < box.min < 1 < box.max
    assert "16.63 ms" in box.help and "concurrency 1" in box.help and "--host-speed" in box.help
    # beside the engine's select box: the same row of the sidebar's two columns ("More settings")
    columns = [[getattr(w, "key", None) for w in c] for c in at.sidebar.columns]
    left = next(i for i, c in enumerate(columns) if "engine" in c)
    assert columns[left + 1].index("host_speed") == columns[left].index("engine")
    argv = ("plan", "--model", "Llama-3.2-1B", "--method", "bf16", "--engine", "vllm", "--json", "--host-speed")
    assert run(capsys, *argv, f"{box.max:g}")[0] == 0
    code, _out, err = run(capsys, *argv, f"{box.max + 0.01:g}")
    assert code == 2 and "--host-speed" in err and len(err.strip().splitlines()) == 1


def test_plan_page_moves_with_the_host_speed_as_the_library_plans_it():
    """Under vLLM a batch-1 step of a 1B model is mostly host work: twice the host speed gives a shorter TPOT; under
    'ideal' (the GPU work alone) the host speed changes nothing."""
    tpot = {}
    for speed in (1.0, 2.0):
        at = _host_app("vllm", speed)
        expected = library_plan(model="Llama-3.2-1B", specs=["bf16"], engine="vllm", host_speed=speed, **HOST_SMALL)
        frame_equals(table(at, "TPOT avg"), summary(expected, model="Llama-3.2-1B"))
        tpot[speed] = expected["results"][0]["tpot_avg_s"]
        said = "engine vllm" + (", host 2x the vllm profile's (its host work / 2)" if speed == 2.0 else "")
        assert said in plain(" ".join(c.value for c in at.caption))
    assert tpot[2.0] < tpot[1.0]
    ideal = [library_plan(model="Llama-3.2-1B", specs=["bf16"], host_speed=s, **HOST_SMALL)["results"][0]["tpot_avg_s"]
             for s in (1.0, 2.0)]
    assert ideal[0] == ideal[1]


def test_serving_page_moves_with_the_host_speed():
    """SGLang's 128-token request pays its own host cost (8.93 ms on the profile's host, far above the 1B's GPU work):
    at four times the host speed the largest rate meeting a 20 ms TTFT p99 moves, as the library computes it."""
    from roofline.dashboard.serving_curves import latency_vs_rate
    from roofline.serving.simulate import Slo

    shown = {}
    for speed in (1.0, 4.0):
        at = _host_app("sglang", speed)
        at.switch_page("views/serving.py").run()
        for key, value in (("srv_prompt", 128), ("srv_output", 16), ("srv_requests", 50), ("srv_ttft", 20.0)):
            at.number_input(key=key).set_value(value)
        next(b for b in at.button if b.label == "Simulate").click()
        timed(f"serving under sglang at host speed {speed:g}", at)
        no_exception(at)
        workload = appdata.workload_from({**HOST_SMALL, "engine": "sglang", "host_speed": speed})
        result = latency_vs_rate(load_model("Llama-3.2-1B"), load_hardware("H100-SXM"), workload, ["bf16"], 128, 16,
                                 50, Slo(ttft_s=0.02, tpot_s=0.05))
        frame_equals(table(at, "max requests/s at the SLO"), display.serving_table(result))
        shown[speed] = table(at, "max requests/s at the SLO")["max requests/s at the SLO"][0]
    assert shown[1.0] != shown[4.0]


def test_a_link_host_speed_outside_the_bound_is_said_and_the_default_kept():
    at = fresh()
    at.query_params.update({"host_speed": "250"})
    at.run()
    no_exception(at)
    assert any(plain(w.value).startswith("link: host_speed: 250") for w in at.sidebar.warning)
    assert at.number_input(key="host_speed").value == 1.0


# --- a plan that generates no token (the CLI's --generated 0) ------------------------------------------------------


def test_plan_page_generating_no_token_shows_no_decode_figures():
    """Generated tokens 0: the prompts are prefilled and nothing is decoded. The ranked table has '-' for TPOT, TPOT
    avg, tokens/s and the bound (as `plan --generated 0` prints), the answer names the prefill, and the Latency tab
    draws the prefill alone (no decode step to draw)."""
    at = fresh().run()
    at.multiselect(key="methods").set_value(["fp8", "kivi-2"])
    at.number_input(key="context").set_value(8192)
    at.number_input(key="generated").set_value(0)
    at.button(key="apply").click()
    timed("plan generating no token", at)
    no_exception(at)
    shown = table(at, "TPOT avg")
    for column in ("TPOT", "TPOT avg", "tokens/s", "bound (top op)"):
        assert set(shown[column]) == {"-"}, column
    assert any("shortest prefill of the batch" in plain(s.value) for s in at.success)
    at.session_state["plan_tab"] = "Latency"
    at.run()
    no_exception(at)
    assert len(svg_images(at)) == 1 and "Prefill (TTFT)" in svg_images(at)[0]
