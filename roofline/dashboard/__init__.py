"""The dashboard's library side (issue 28: apart from report/, which keeps display units, the answer and plots):
what the Streamlit app (app/) shows, computed without Streamlit so tests cover it.

    appdata        scenario sources (catalogue names, uploads), plan rows, downloads, validation and claims rows
    share          the scenario's fields, declared once, and the URL query string that carries them
    explore        the fit solver, sweeps, side-by-side diffs and the Pareto table
    rooflinepage   the Roofline page's op points, axes and limits
    serving_curves latency against request rate per method (roofline.serving underneath)
    pages          the slow pages' data (claims, validation reports) kept by content
    warm           `python -m roofline.dashboard.warm`: fill the caches the dashboard reads, in the background

Floor: above report/ (formatting, answer, plots) and everything below; only cli/ imports it (`roofline app`).
"""
