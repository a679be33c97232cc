"""Lab tooling for the notebook series: per-notebook configuration and knowledge-base cache,
display helpers, widgets, and headless notebook execution."""
