"""Registering, editing, archiving and removing checkpoints: the form and the audited saves."""
