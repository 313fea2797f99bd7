"""Numbers: compile a sympy expression once, cache it by content, bind a device's figures on load.

`codegen` keys an expression set by the content of its inputs (pydantic JSON, the code version and the active
kernel profile), prints it as Python (`codeprint`: common subexpressions, exact integer arithmetic where sympy has
it), compiles it once and keeps it in memory and on disk; `bind` supplies the numbers of free symbols (a device's
ceilings) when an entry is loaded, so one entry serves every device of one ceiling structure. It knows nothing of
specs, methods or op graphs: every floor that turns its sympy expressions into numbers uses it (the op graph's
compiled rows and totals: roofline.costmodel.compiled; a method's notes; the planner's capacity and limits).
"""
