"""benchback-rl's tools for users of the templates (python -m tools.starter: a template without its
bookkeeping)."""
