"""Views: ``pages`` (checkpoints, batches, state, charts) and ``maintenance`` (plan, confirm, run, audit)."""
