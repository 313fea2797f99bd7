"""roofline dashboard: `streamlit run app/main.py` (app/.streamlit/config.toml binds 127.0.0.1) or `roofline app`.

The sidebar holds the scenario every page uses (and the URL's query string mirrors it); each page draws numbers
from roofline.report (STYLE 14).
"""

import contextlib
import os
import sys
import time
from pathlib import Path

import streamlit as st

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the helper package beside this script (streamlit adds it; AppTest may not)
    sys.path.insert(0, str(HERE))

START = time.perf_counter()
PROFILE = os.environ.get("ROOFLINE_APP_PROFILE")  # a folder: one cProfile file per script run (development)
if PROFILE:
    import cProfile

    _profiler = cProfile.Profile()
    _profiler.enable()
# Streamlit's one-time "use `streamlit run`" check (delta_generator._maybe_print_use_warning) calls inspect.stack()
# with source context on the first element a server sends: a realpath of every imported module, 0.1-0.3 s of the cold
# first load on the 2-core box. This script always runs under `streamlit run` (or AppTest): mark it done.
import streamlit.delta_generator as _delta_generator  # noqa: E402

_delta_generator._use_warning_has_been_displayed = True
st.set_page_config(page_title="roofline", layout="wide")
# the first run of a session says what it is doing before the planner's imports and first compile (seconds on a cold
# server), and the answer replaces the message
from roofline_app import loading  # noqa: E402

loading.show()

from roofline_app import cache  # noqa: E402
from roofline_app.scenario import sidebar  # noqa: E402

PAGES = [
    st.Page(HERE / "views" / "plan.py", title="Plan", url_path="plan", default=True),
    st.Page(HERE / "views" / "sweeps.py", title="Sweeps", url_path="sweeps"),
    st.Page(HERE / "views" / "compare.py", title="Side by side", url_path="compare"),
    st.Page(HERE / "views" / "pareto.py", title="Pareto", url_path="pareto"),
    st.Page(HERE / "views" / "serving.py", title="Serving", url_path="serving"),
    st.Page(HERE / "views" / "fleet.py", title="Fleet", url_path="fleet"),
    st.Page(HERE / "views" / "roofline_page.py", title="Roofline", url_path="roofline"),
    st.Page(HERE / "views" / "validation.py", title="Validation", url_path="validation"),
    st.Page(HERE / "views" / "claims.py", title="Claims", url_path="claims"),
]
page = st.navigation(PAGES)
cache.FULL_RUN.active = True  # cache.fragment records only the runs of a fragment alone
cache.hold_warmup()  # the warm-up process waits while this run computes
try:
    sidebar()
    page.run()
finally:  # st.stop() ends a page early: its run still counts
    cache.FULL_RUN.active = False  # plain Python: after st.stop() a Streamlit call here may raise
    cache.release_warmup()
    cache.start_warmup()  # once per server, after the first page is drawn: it competes for no CPU before it
    cache.preload_symbolic()  # likewise: sympy imported before the first compile asks for it
    cache.record_run(page.title, time.perf_counter() - START)
    with contextlib.suppress(Exception):  # after st.stop() a Streamlit call may raise: last, so nothing is skipped
        st.session_state["_painted"] = True
        loading.clear()
    if PROFILE:
        _profiler.disable()
        os.makedirs(PROFILE, exist_ok=True)
        _profiler.dump_stats(os.path.join(PROFILE, f"{time.time():.3f}-{page.url_path or 'plan'}.prof"))
