"""The shared floor of benchback-rl's tooling: what the sweep (sweep/), the analysis (analysis/),
evaluation (evaluation/) and the scripts' bookkeeping (bookkeeping.py) all read; it imports none of
them (tests/test_repository.py checks the import graph). One job per module:

    study          study.toml read: the study that every tool reads (load)
    study_tables   study.toml's tables read and checked, one reader each
    study_types    what a study is (its dataclasses)
    run_args       a run's flags read as the scripts' parser reads them
    events         a run folder's TensorBoard events: read, merged when resumed, tied to its times
    runlog         a run folder (config.json, summary.json, scalars) read and checked
    env_timing_file  the env-timing file read and checked, one way for every reader
    option_checks  the check of one option's value each (a count, a range, seconds, a shard, a list)
    shell_quoting  words quoted for bash: the dry run's commands
    env_ids        env ids the scripts know (fixed lists, checked before JAX loads), their packages
    command_line   a script's command line read as its user means it; its first lines' checks
    run_checks     a script's input checked before its run (bookkeeping.py, evaluate.py, the sweep)
    plain_bookkeeping  a script's own bookkeeping (a starter copy's): run folder, progress, stops
    saving         the Saver: a script's model file when it ends, its state every N iterations
    resuming       --resume: the resume file, a stopped run read and checked, its time before
    event_files    a run's events files as records: read, trimmed after a resume, flushed
"""
