"""Pure-Python validation of the roofline against measurements (no torch)."""
