"""benchback-rl's tools for users of the templates: starter (python -m tools.starter: a template
without its bookkeeping) and launch (a script run in a fresh process)."""
