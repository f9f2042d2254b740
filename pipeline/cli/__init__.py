"""The `pipeline` command: main.py assembles the parser and is the one error boundary; common.py holds the
shared options; data, jobs, gate, planning and rollout each hold their commands and add their subcommands.
Exit codes come from pipeline/common/exit_codes.py. Imports from every package; nothing imports it."""
