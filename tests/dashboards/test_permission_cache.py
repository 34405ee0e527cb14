"""A user's permissions from the shared cache (dashboards/permission_cache.py): read once, and every
grant given or taken through Django reaches the next request."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from dashboards.permission_cache import forget_permissions

pytestmark = pytest.mark.django_db

REGISTER = "Register a checkpoint"


@pytest.fixture(autouse=True)
def cached_backend(settings):
    # The PostgreSQL leg's settings have it (Redis); the embedded leg's cache is this process's own.
    settings.AUTHENTICATION_BACKENDS = ["dashboards.permission_cache.CachedPermissionsBackend"]
    # A rolled-back test's user id comes again on SQLite; its set may still be in the cache.
    forget_permissions()


@pytest.fixture
def signed_in(client, viewer_user):
    client.force_login(viewer_user)
    return client, viewer_user


def _may_register(client) -> bool:
    return REGISTER in client.get(reverse("dashboards:checkpoint-list")).content.decode()


def _add_checkpoint() -> Permission:
    return Permission.objects.get(codename="add_checkpoint", content_type__app_label="dashboards")


def test_a_second_page_reads_no_permission_rows(signed_in):
    client, user = signed_in
    user.user_permissions.add(_add_checkpoint())
    assert _may_register(client)

    with CaptureQueriesContext(connection) as queries:
        assert _may_register(client)

    assert not [q["sql"] for q in queries.captured_queries if "auth_permission" in q["sql"]]


def test_a_permission_given_then_taken_reaches_the_next_page(signed_in):
    client, user = signed_in
    assert not _may_register(client)

    user.user_permissions.add(_add_checkpoint())
    assert _may_register(client)

    user.user_permissions.remove(_add_checkpoint())
    assert not _may_register(client)


def test_a_group_s_grant_and_its_removal_reach_the_next_page(signed_in):
    client, user = signed_in
    operators = Group.objects.create(name="operators")
    user.groups.add(operators)
    assert not _may_register(client)

    operators.permissions.add(_add_checkpoint())
    assert _may_register(client)

    user.groups.remove(operators)
    assert not _may_register(client)

    user.groups.add(operators)
    assert _may_register(client)
    operators.delete()  # its rows go by cascade, without m2m_changed
    assert not _may_register(client)


def test_one_user_s_grant_is_not_another_s(signed_in, operator_user):
    from django.test import Client

    viewer, _ = signed_in
    operator = Client()
    operator.force_login(operator_user)
    assert _may_register(operator) and not _may_register(viewer) and _may_register(operator)
