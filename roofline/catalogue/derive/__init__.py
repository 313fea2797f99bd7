"""Measured ceilings derived from measured per-op databases, for accelerators this project cannot run.

`aiconfigurator` (NVIDIA/aiconfigurator, PyPI `aiconfigurator-core`, Apache-2.0) ships per-system, per-backend,
per-version tables of kernel latencies collected on the real GPUs (systems/data/<system>/<op>/<backend>/<version>/
*.parquet). `tables` reads them (pandas + pyarrow: the optional extra `aic`), `fits` turns rows into the planner's
ceilings with the definitions of the project's own calibration (roofline.validation.calibrate for the streaming
law and the large GEMM, validate/clients/calibrate.py for the GEMM, attention and grouped-GEMM laws), `section`
assembles a `measured:` section of kind 'derived' with its provenance, and `python -m roofline.catalogue.derive`
writes the committed files. Nothing here runs at plan time: the planner reads the committed YAML.
"""
