"""The nightly job and its scheduler: the whole chain, once per run. May import every package but cli."""
