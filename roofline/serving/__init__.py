"""Request-level serving simulation on top of the planner's step model."""
