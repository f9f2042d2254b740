"""The `pipeline` command: main.py assembles the parser and is the one error boundary; common.py holds the
shared options; data, jobs, gate and planning each hold their commands and add their subcommands. Imports
from every package; nothing imports it."""
