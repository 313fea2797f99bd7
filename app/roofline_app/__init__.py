"""Helpers of the Streamlit dashboard: the shared scenario sidebar, cached library calls, and static SVG charts."""
