"""The sweep's Python side, which bench.sh runs as `python -m sweep ACTION` (the repository on
PYTHONPATH), and the study that the sweep and the analysis both read. One job per module:

    study          study.toml read: the study that every tool reads (load)
    study_tables   study.toml's tables read and checked, one reader each
    study_types    what a study is (its dataclasses)
    __main__       the planner: the runs of the chosen experiments, their shards, which are done
    bench          bench.sh's command line read and checked, its --help, the restart with signals
    cli            the sweep's options, declared once: bench.sh, its --help, the parsers read them
    options        the matrix options checked against the study: what a sweep selects
    preset         a preset (bench.sh --preset NAME, --smoke) written into the options
    option_checks  the check of one option's value each (a count, a range, seconds, a shard, a list)
    matrix         every run of a selection, its command and its shard
    resume         which runs are done (or continue with --resume), and the locks (one mechanism)
    run_check      the run arguments after bench.sh's --, checked by the scripts' own parser
    run_args       a run's flags read as the scripts' parser reads them
    env_timing     the env step costs measured (python -m sweep.env_timing)
    env_timing_file   the env-timing file read and checked, one way for every reader
    env_timing_check  whether a sweep must (re)measure the env timing first
    sbatch         bench.sh --slurm: --slurm-args read as sbatch reads them, the job array's script
    shell_quoting  words quoted for bash: the dry run's commands
"""
