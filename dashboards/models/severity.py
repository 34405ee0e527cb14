"""Finding severities as stored (ordered: a higher number is worse)."""

SEVERITY_INFO = 10
SEVERITY_WARNING = 20
SEVERITY_ERROR = 30
