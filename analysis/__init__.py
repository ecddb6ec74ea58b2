"""The analysis behind plot_results.py (runs -> CSVs, figures, REPORT.md, the README block), one job per module:

    loading   run folders (through runlog.py) and runs.csv files -> one tidy table of completed runs; env timing
    summary   a row per run: its iteration windows and the experiments it belongs to
    stats     numpy and scipy only: geometric mean, cluster bootstrap, rank correlation with its interval
    speedups  pairs of runs -> the speedup and env-cost tables, and the runs left out of them
    results   everything above computed once, for the figures and the report
    plotting  axes, palettes, legends and interval markers shared by the figures
    figures   the figures study.toml asks for, experiment by experiment
    report    REPORT.md and the README block
    output    writing --out without losing what was there, and writing files through links
    escape    text from the runs made safe for spreadsheets (the CSVs) and markdown (REPORT.md, the README)

and, on its own (python -m analysis.learning_curves): learning curves, each run's episodic return per env.

The study (study.toml, through study.py) is loaded once by plot_results.py and passed down. No module names an
experiment: which one is the headline, which ones the README's tables hold, which figures each gets and which one a
platform comparison repeats are declared in study.toml.
"""
