"""Shared test fixtures: where the real checkpoints are, copies to damage, and the cast of users."""

from __future__ import annotations

import logging
import shutil
import stat
from pathlib import Path

import pytest

from fixture_paths import OUR_FIXTURES, SPARK_TEST_RESOURCES  # noqa: F401  (re-exported for tests)
from redis_keys import CACHE_KEY_PREFIX, delete_keys_of_this_run
from suite_layout import assign_markers, group_files_that_share_fixtures, put_xdist_groups_into_node_ids

# py4j logs at INFO from __del__ while the interpreter shuts down, after pytest closed the stream
# (any test that starts PySpark: tests/spark/, the listener's, the library's restart checks).
logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(items: list[pytest.Item]):
    # Before the other plugins: `-m` deselects by the markers added here, and pytest-xdist reads the groups.
    for item in items:
        assign_markers(item)
    group_files_that_share_fixtures(items)
    yield
    # After them: pytest-xdist has written each group where pytest 9.2 no longer reads it.
    put_xdist_groups_into_node_ids(items)


@pytest.fixture(scope="session", autouse=True)
def redis_keys_of_this_run():
    """On Redis, cache under this run's own prefix, and delete what the run wrote when it ends."""
    from django.conf import settings
    from django.test import override_settings

    if not settings.REDIS_URL:
        yield
        return
    with override_settings(CACHES={"default": {**settings.CACHES["default"], "KEY_PREFIX": CACHE_KEY_PREFIX}}):
        yield
    delete_keys_of_this_run(settings.REDIS_URL)


@pytest.fixture(autouse=True)
def state_keys_dir(tmp_path: Path, settings) -> Path:
    """Where syncs keep state key sets (workers.state_follow): the test's own, not the checkout's var/."""
    settings.STATE_KEYS_DIR = tmp_path / "statekeys"
    return settings.STATE_KEYS_DIR


@pytest.fixture
def checkpoint_roots(tmp_path: Path, settings) -> Path:
    """An allowed root for registered checkpoints, empty at start."""
    root = tmp_path / "checkpoints"
    root.mkdir()
    settings.CHECKPOINT_ROOTS = [str(root)]
    return root


@pytest.fixture
def copy_checkpoint(checkpoint_roots: Path):
    """Copy a real checkpoint under the allowed root, so a test may add or damage files."""

    def copy(source: Path, name: str | None = None) -> Path:
        target = checkpoint_roots / (name or source.name)
        # The shared fixtures are read-only; the copies must be writable to be damaged.
        shutil.copytree(source, target, copy_function=shutil.copyfile)
        for path in [target, *target.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
        return target

    return copy


@pytest.fixture
def operator_user(django_user_model):
    """May register and edit checkpoints (the permissions an operators group would grant)."""
    from django.contrib.auth.models import Permission

    user = django_user_model.objects.create_user("olivia", password="operator-password")
    user.user_permissions.add(*Permission.objects.filter(codename__in=["add_checkpoint", "change_checkpoint"]))
    return user


@pytest.fixture
def viewer_user(django_user_model):
    """A signed-in user with no permission beyond viewing."""
    return django_user_model.objects.create_user("victor", password="viewer-password")


@pytest.fixture
def viewer_client(client, viewer_user):
    """A test client signed in as the viewer."""
    client.force_login(viewer_user)
    return client


@pytest.fixture
def pipeline_token(django_user_model) -> str:
    """A machine user with only the permission to send progress (what a pipeline's listener uses), and its token."""
    from django.contrib.auth.models import Permission
    from rest_framework.authtoken.models import Token

    user = django_user_model.objects.create_user("pipeline")
    user.user_permissions.add(Permission.objects.get(codename="ingest_progress"))
    return Token.objects.create(user=user).key


@pytest.fixture
def eager_celery():
    """Run tasks in the calling process (for view tests that only check what a task leads to)."""
    from ckptweb.celery import app

    previous = app.conf.task_always_eager
    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = previous


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """Close connections after each request, so the live server's thread leaves none open at teardown."""
    from django.conf import settings

    settings.DATABASES["default"]["CONN_MAX_AGE"] = 0


@pytest.fixture
def oncall_group(db):
    """The "on-call" group of migration 0008.

    Made again when missing: a transactional test's flush empties the tables after it, and data
    migrations are not replayed (permissions are, by post_migrate).
    """
    from django.contrib.auth.models import Group, Permission

    group, _ = Group.objects.get_or_create(name="on-call")
    codenames = ("plan_maintenance", "run_maintenance", "approve_maintenance")
    group.permissions.add(*Permission.objects.filter(content_type__app_label="dashboards", codename__in=codenames))
    return group


@pytest.fixture
def oncall_client(client, django_user_model, oncall_group):
    """A test client signed in as "olga", a member of the on-call group."""
    user = django_user_model.objects.create_user("olga", password="oncall-password")
    user.groups.add(oncall_group)
    client.force_login(user)
    return client
