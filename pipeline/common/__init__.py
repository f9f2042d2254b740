"""Shared by every step, importing no other package of pipeline: errors and exit codes, the clock, logging,
clean stops, the YAML loader, the packaged data folders, crash-safe appends, the output schemas, the gate
registry (names, thresholds, defaults), the vocabulary (verdicts, statuses, routes, buckets, tiers), rows as
tables, and the config that reads gates/admission.yaml."""
