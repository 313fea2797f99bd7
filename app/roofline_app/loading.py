"""The message a session's first run shows while the planner loads (main.py), and the early end of a page.

Streamlit sends no element after st.stop(): a page that ends early (nothing fits, a form not yet submitted) clears
the message before it stops (`stop`), else "The answer appears here" stays above the page for the session."""

from typing import NoReturn

import streamlit as st

SLOT = "_loading_slot"


def show() -> None:
    """On a session's first run, the loading message, in a slot that the run's end (`clear`) empties."""
    if st.session_state.get("_painted"):
        st.session_state[SLOT] = None
        return
    slot = st.empty()
    slot.info("Loading roofline: the first plan of a session imports the planner and compiles each method's cost "
              "model (a few seconds on a cold server). The answer appears here.", icon=":material/hourglass_top:")
    st.session_state[SLOT] = slot


def clear() -> None:
    """Empties the loading message, if this run shows one."""
    slot = st.session_state.get(SLOT)
    if slot is not None:
        slot.empty()
        st.session_state[SLOT] = None


def stop() -> NoReturn:
    """st.stop(), the loading message cleared first."""
    clear()
    st.stop()
