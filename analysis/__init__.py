"""The analysis behind plot_results.py (runs -> CSVs, figures, REPORT.md, the README block), in layers
(each module imports only from those above it):

    common           what every layer uses: BadInput, a run's identity and every key list derived from it,
                     the tables' columns, names and order, text made safe for CSVs and markdown
    stats            numpy and scipy only, pure functions over arrays: geometric mean, cluster bootstrap,
                     rank correlation with its interval
    events           a run folder's TensorBoard events: read, merged for a resumed run, tied to its times
    runlog           a run folder (config.json, summary.json, scalars) read and checked against the study
    output           the analysis' own files: a runs.csv read back, --out written without losing anything
    loading          run folders and runs.csv files -> one table of completed runs, a row per run; env timing
    speedups         pairs of runs -> the speedup and env-cost tables, and the runs left out of them
    learning         the learning experiments: returns against the reference's, times to reach it
    results          everything above computed once (the Results), the data types compared, why a table
                     has no data
    markdown         the speedup, env-cost, learning and data-type tables in markdown
    report           REPORT.md and the README block (with markdown.py, the only modules writing markdown)
    plotting         axes, palettes, legends and interval markers, drawn from frames and arrays (matplotlib)
    speedup_figures  the figures of speedups: per experiment, per platform tag, against env cost
    time_figures     the figures of times: totals, iteration windows, rollout and update, compile modes,
                     backends, data types
    figures          the figure kinds study.toml may list, the learning figure, drawing the ones it asks for

and, on its own (python -m analysis.learning_curves): learning curves, each run's episodic return per env.

The study (study.toml, through sweep/study.py) is loaded once by plot_results.py and passed down. No
module names an experiment: which one is the headline, which ones the README's tables hold, which
figures each gets and which one a platform comparison repeats are declared in study.toml.
"""
