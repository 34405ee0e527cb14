"""Views: ``pages`` (checkpoints, batches, state, charts), ``registry`` (register, edit, archive, restore, remove)
and ``maintenance`` (plan, confirm, run, audit)."""
