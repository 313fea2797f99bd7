"""Kernels that measure the roofline's ops on a real GPU, and the predicted-vs-measured comparison.

A folder of the repository (not an installed package): run from a checkout as `python -m validate
bench|compare|calibrate ...`. Families of kernels register in validate.registry on import of
validate.families; each measures cases on the GPU and predicts the same cases from the specs alone.
"""
