"""Checkpoint maintenance: pure ``plan_*`` functions and ``apply_plan`` through the storage edge.

Each action lives in its own module and returns a ``MaintenancePlan`` (``plan.py``) naming every
file it writes and deletes and the preconditions; ``execute.apply_plan`` carries a confirmed
plan out crash-safely.
"""
