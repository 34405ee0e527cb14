"""The names the admin shows for our models: plurals as English writes them."""

from __future__ import annotations

import re

import pytest
from django.apps import apps

# Names whose plural is not the name and an "s" (Django's default): "directory", "batch", "status".
NEEDS_OWN_PLURAL = re.compile(r"(?:[^aeiou]y|s|x|z|ch|sh)$")


@pytest.mark.parametrize("model", apps.get_app_config("dashboards").get_models(), ids=lambda model: model.__name__)
def test_every_model_has_an_english_plural(model):
    name, plural = str(model._meta.verbose_name), str(model._meta.verbose_name_plural)
    assert not (NEEDS_OWN_PLURAL.search(name) and plural == f"{name}s"), plural


@pytest.mark.django_db
def test_the_admin_index_lists_event_log_directories(admin_client):
    page = admin_client.get("/admin/").content.decode()

    assert ">Event log directories<" in page
    assert "directorys" not in page
