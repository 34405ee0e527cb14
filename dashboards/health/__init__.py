"""The health model every page, /metrics and the alert rules share, and whose progress a checkpoint owns."""
