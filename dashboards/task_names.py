"""The workers' Celery tasks that the web side sends, by their registered names.

The web process never imports workers.tasks (tests/test_import_boundaries.py): importing it would
pull the sync, the state scans and maintenance into every request's process and tie the two sides'
import graphs together. It sends a task by name instead (dashboards.queueing), and beat's
PeriodicTask rows (dashboards.schedules) store the same names.
"""

SYNC_CHECKPOINT = "workers.tasks.sync_checkpoint"
SAMPLE_STATE_PARTITION = "workers.tasks.sample_state_partition"
PLAN_MAINTENANCE = "workers.tasks.plan_maintenance"
RUN_MAINTENANCE = "workers.tasks.run_maintenance"
RUN_MAINTENANCE_POLICY = "workers.tasks.run_maintenance_policy"

SENT_FROM_THE_WEB = (SYNC_CHECKPOINT, SAMPLE_STATE_PARTITION, PLAN_MAINTENANCE, RUN_MAINTENANCE, RUN_MAINTENANCE_POLICY)
