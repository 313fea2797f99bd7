"""Predicted against measured: the pure-Python half of validation (DESIGN "Validation method").

A committed results file (`results_file`) holds GPU measurements of kernel cases; each case is predicted from
the roofline spec alone (`predict`, one module per kernel family in `families`), compared (`compare`), judged
against the issue's four targets (`targets`), and its ceilings written into a hardware spec (`calibrate`).
Nothing here imports torch or triton: the kernels that produced the measurements live in the checkout's
validate/ folder, which imports this package (never the other way round).
"""
