"""The analysis behind plot_results.py (runs -> CSVs, figures, REPORT.md, the README block), one job per module:

    errors           BadInput: an input the analysis cannot use (one line, exit status 2)
    names            how things are named and ordered in tables, titles and legends (pretty_pair, in_order)
    escape           text from the runs made safe for spreadsheets (the CSVs) and markdown (REPORT.md, the README)
    loading          run folders (through analysis/runlog.py) and runs.csv files -> one tidy table of completed runs; env
                     timing
    summary          a row per run: its iteration windows and the experiments it belongs to
    stats            numpy and scipy only: geometric mean, cluster bootstrap, rank correlation with its interval
    speedups         pairs of runs -> the speedup and env-cost tables, and the runs left out of them
    learning         the learning experiments: returns against the reference's, times to reach it
    dtypes           the data types compared: each framework's time in bfloat16 / in float32
    results          everything above computed once, for the figures and the report
    gaps             why a panel or a table has no data (a window no run reaches, no pair of runs), in words
    plotting         axes, palettes, legends and interval markers, drawn from frames and arrays (matplotlib)
    time_figures     the figures of times: totals, iteration windows, rollout and update, compile modes, backends
    speedup_figures  the figures of speedups: per experiment, per platform tag, against env cost
    learning_figure  the learning curves of a learning experiment against the reference
    figures          the figure kinds study.toml may list, and drawing the ones it asks for
    markdown         markdown tables (no matplotlib: neither the report nor the README block needs it)
    speedup_markdown the speedup and env-cost tables in markdown
    readme_block     the README block (headline tables, the previous edition) and the README with it replaced
    learning_report  the learning tables in markdown (the README's learning block, REPORT.md's section)
    dtype_report     the data-type tables in markdown (REPORT.md's section)
    report           REPORT.md
    output           writing --out without losing what was there (each file by atomic.py's write_file)

and, on its own (python -m analysis.learning_curves): learning curves, each run's episodic return per env.

The study (study.toml, through sweep/study.py) is loaded once by plot_results.py and passed down. No module names an
experiment: which one is the headline, which ones the README's tables hold, which figures each gets and which one a
platform comparison repeats are declared in study.toml.
"""
