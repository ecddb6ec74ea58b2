"""The analysis behind plot_results.py (runs -> CSVs, figures, REPORT.md, the README block), in
layers: each module imports only from those above it.

    common           BadInput; a run's identity and every key list derived from it; names; safe text
    stats            pure functions over arrays: geometric mean, cluster bootstrap, rank correlation
    output           its own files: a runs.csv read back, --out written without losing a row
    owned            output paths checked: links, devices, and whose files are in --out (marks)
    loading          run folders, runs.csv -> a table of completed runs, a row per run; env timing
    speedups         pairs of runs -> the speedup and env-cost tables, and the runs left out of them
    learning         the learning experiments: returns against the reference's, times to reach it
    results          all the above computed once; the data types compared; why a table has no data
    markdown         speedup, env-cost, learning, data-type, agents and memory tables in markdown
    report           REPORT.md and the README block (with markdown, the only ones writing markdown)
    plotting         axes, palettes, legends, interval markers from frames and arrays (matplotlib)
    speedup_figures  the figures of speedups: per experiment, per platform tag, against env cost
    time_figures     the figures of times: totals, windows, rollout/update, compile modes, backends
    figures          figure kinds study.toml may list; the learning and agents figures; drawing them
    learning_curves  on its own (python -m analysis.learning_curves): each run's return per env

A run folder is read by the shared floor's core/runlog.py (its events by core/events.py). The
study (study.toml, through core/study.py) is loaded once by plot_results.py and passed down. No
module names an experiment: which one is the headline, which ones the README's tables hold, which
figures each gets and which one a platform comparison repeats are declared in study.toml.
"""
