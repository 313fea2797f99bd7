"""Kernels that measure the roofline's ops on a real GPU, and the predicted-vs-measured comparison.

A folder of the repository (not an installed package): run from a checkout as `python -m validate
bench|compare|calibrate ...`. validate.ops lists the kernel families (one folder each: reference, kernel,
cases); validate.common holds what they share. Each family measures cases on the GPU and predicts the same
cases from the specs alone (roofline.validation).
"""
