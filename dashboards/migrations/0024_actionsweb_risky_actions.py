"""Issue 27: the risky maintenance actions (rewind, skip, repair, undo) and the permission each needs."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('dashboards', '0023_tws_state_variables'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='maintenancerun',
            options={'permissions': [('plan_maintenance', 'Can ask for a maintenance plan'), ('run_maintenance', 'Can confirm and run maintenance'), ('approve_maintenance', 'Can approve maintenance confirmed by someone else'), ('rewind_checkpoint', 'Can confirm and approve a rewind'), ('skip_batch', 'Can confirm and approve a skip'), ('repair_checkpoint', 'Can confirm and approve a repair'), ('undo_maintenance', 'Can confirm and approve an undo')]},
        ),
        migrations.AlterField(
            model_name='maintenancerun',
            name='action',
            field=models.CharField(choices=[('purge', 'Purge old offsets and commits'), ('snapshot', 'Write state snapshots'), ('cleanup', 'Clean up old state files'), ('compact', 'Compact and expire metadata logs'), ('rewind', 'Rewind to a batch'), ('skip', 'Skip a batch or part of a source'), ('repair', 'Repair what Spark refuses at restart'), ('undo', 'Undo a run from its backup')], max_length=20),
        ),
    ]
