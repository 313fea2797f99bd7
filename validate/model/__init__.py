"""The lab's micro-architecture model of its own kernels: each measured case predicted from the hardware spec alone.

A committed results file (roofline.validation.results_file: the planner's schema) holds GPU measurements of kernel
cases; each case is predicted from the spec alone (`predict`, one module per kernel family in `families`), with
its kernel's static structure (`kernel_structure`, structure/*.json from validate.common.sass), the fixed costs
of its launches (`fixed_costs`), the contention of co-resident warps (`contention`) and the SM clock it ran at
(`case_clock`); compared (`compare`), judged against the validation targets (`targets`) and summarized as the
data the planner ships (`summary` -> roofline/validation/kernel_summaries/). Pure Python (no torch, no triton):
it imports the planner, never a kernel (an import-linter contract); the planner never imports it.
"""
