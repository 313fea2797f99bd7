"""What a planner's user needs of validation (DESIGN "Validation method", "Two houses").

`results_file`: the schema of a GPU run's results file (read by `calibrate`, which writes a hardware spec's
`measured:` section from the ceilings microbenchmarks); `clients`, `client_memory`, `tp`: real decoder clients,
their memory boundary and tensor-parallel all-reduce predicted from the specs and compared with their runs;
`kernel_summary`: the lab's kernel validation as shipped data (per family and per case APE, the targets).
The kernel micro-architecture model that produces those summaries is the lab's (validate.model): this package
never imports it, nor torch or triton.
"""
