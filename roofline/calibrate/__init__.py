"""`roofline calibrate`: measure a user's GPU and write a hardware file whose `measured` section the planner reads.

Two halves, so the measuring half runs on a GPU box with only torch installed:
    measure        torch + the standard library: times the microbenchmarks and writes a raw JSON
                   (`python -m roofline.calibrate.measure --out raw.json`)
    fit, section   the standard library only: the latency-bandwidth fits and the raw JSON -> `measured` mapping
    hardware_file  pydantic: a catalogue device's datasheet fields + that mapping -> a validated hardware YAML
    compare        each ceiling of a calibrated file against a catalogue device's measured section
This package imports nothing eagerly (no pydantic, no sympy), so `-m roofline.calibrate.measure` needs only torch.
"""
