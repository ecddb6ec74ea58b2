"""The analysis' one error: an input it cannot use (a path, a file, a study.toml, an --out that would lose data)."""


class BadInput(Exception):
    """An input the analysis cannot use: plot_results.py (and analysis.learning_curves) print the message as one
    line and exit with status 2, before anything is written."""
