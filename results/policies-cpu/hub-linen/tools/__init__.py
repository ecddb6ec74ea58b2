"""benchback-rl's tools for users of the templates: starter (python -m tools.starter: a template
without its bookkeeping), launch (a script run in a fresh process), run_checks (a script's input
checked before its run, by bookkeeping.py, evaluate.py and the sweep)."""
