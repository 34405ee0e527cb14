"""The health model every page, /metrics and the alert rules share (query_status.assess)."""
