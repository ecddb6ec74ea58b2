"""The sweep's Python side, which bench.sh runs as `python -m sweep ACTION` (the repository on
PYTHONPATH); the study it plans from is the shared floor's (core/study.py), which the analysis
reads too. One job per module:

    __main__       the planner: the runs of the chosen experiments, their shards, which are done
    bench          bench.sh's command line read and checked, its --help, the restart with signals
    cli            the sweep's options, declared once: bench.sh, its --help, the parsers read them
    options        the matrix options checked against the study: what a sweep selects
    preset         a preset (bench.sh --preset NAME, --smoke) written into the options
    matrix         every run of a selection, its command and its shard
    resume         which runs are done (or continue with --resume), and the locks (one mechanism)
    run_check      the run arguments after bench.sh's --, checked by the scripts' own parser
    env_timing     the env step costs measured (python -m sweep.env_timing)
    env_timing_check  whether a sweep must (re)measure the env timing first
    sbatch         bench.sh --slurm: --slurm-args read as sbatch reads them, the job array's script
"""
