"""A session's first run says "Loading roofline ... The answer appears here" while the planner loads; when the page
is drawn the message is gone, on every page, those that end early with st.stop() included (Streamlit sends no
element after st.stop(), so the message used to stay above the Serving and Fleet forms and above a plan where
nothing fits, for the whole session)."""

from __future__ import annotations

from pathlib import Path

import pytest

AppTest = pytest.importorskip("streamlit.testing.v1").AppTest
ENTRY = Path(__file__).resolve().parents[2] / "app" / "main.py"


@pytest.mark.parametrize(("page", "query"), [
    ("views/serving.py", {}),  # ends before its form is submitted
    ("views/fleet.py", {}),
    ("views/plan.py", {"model": "gpt-oss-120b", "methods": "bf16"}),  # nothing fits: the fit solver, then stop
    ("views/plan.py", {}),
])
def test_the_first_runs_loading_message_is_gone_once_the_page_is_drawn(page, query):
    at = AppTest.from_file(str(ENTRY), default_timeout=120)
    at.query_params.update(query)
    at.switch_page(page).run()
    assert not at.exception
    assert not [i.value for i in at.info if "Loading roofline" in i.value]
