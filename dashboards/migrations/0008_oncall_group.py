"""The "on-call" group: may plan, confirm, run and approve maintenance.

Membership is managed in the admin; users outside it can view everything but change nothing.
"""
from django.db import migrations

GROUP = "on-call"
PERMISSIONS = {
    "plan_maintenance": "Can ask for a maintenance plan",
    "run_maintenance": "Can confirm and run maintenance",
    "approve_maintenance": "Can approve maintenance confirmed by someone else",
}


def create_group(apps, schema_editor):
    # Django creates permissions after all migrations (post_migrate); the group needs them now,
    # so they are made here with the names MaintenanceRun.Meta.permissions gives them.
    ContentType = apps.get_model("contenttypes", "ContentType")
    Permission = apps.get_model("auth", "Permission")
    Group = apps.get_model("auth", "Group")
    run_type, _ = ContentType.objects.get_or_create(app_label="dashboards", model="maintenancerun")
    group, _ = Group.objects.get_or_create(name=GROUP)
    for codename, name in PERMISSIONS.items():
        permission, _ = Permission.objects.get_or_create(content_type=run_type, codename=codename, defaults={"name": name})
        group.permissions.add(permission)


def remove_group(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name=GROUP).delete()


class Migration(migrations.Migration):
    dependencies = [("dashboards", "0007_maintenance"), ("auth", "0012_alter_user_first_name_max_length"), ("contenttypes", "0002_remove_content_type_name")]
    operations = [migrations.RunPython(create_group, remove_group)]
