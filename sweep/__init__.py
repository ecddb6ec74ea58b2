"""The sweep's Python side, which bench.sh runs as `python -m sweep ACTION` (the repository on PYTHONPATH), and the
study that the sweep and the analysis both read. One job per module:

    study            study.toml read and checked: frameworks, envs, sizes, experiments, windows, presets
    study_types      what a study is (its dataclasses)
    __main__         the planner: the runs of the chosen experiments, their shards, which are done, bench.sh's actions
    cli              the sweep's options, declared once: bench.sh's --help and the planner's parsers read them
    options          the matrix options checked against the study: what a sweep selects
    preset           a preset (bench.sh --preset NAME, --smoke) written into the options
    option_checks    the check of one option's value each (a count, a range, seconds, a shard, a list)
    matrix           every run of a selection, its command and its shard
    resume           which runs are done (or continue with --resume), and the cell locks
    run_check        the run arguments after bench.sh's --, checked by the scripts' own parser
    run_args         a run's flags read as the scripts' parser reads them
    env_timing       the env step costs measured (python -m sweep.env_timing)
    env_timing_file  the env-timing file read and checked, one way for every reader
    env_timing_check whether a sweep must (re)measure the env timing first
    sbatch_options   --slurm-args read as sbatch reads them
    sbatch_script    the job array script of bench.sh --slurm
    shell_quoting    words quoted for bash: the dry run's commands
"""
