"""Before and after a rollout: admission of candidate tasks, the ledger and its estimates, backtests
and the simulator. May import the packages below it (common ... rollout); the views show it."""
