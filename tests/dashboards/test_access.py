"""Access: production settings pass Django's deploy check, forms need CSRF, logins are rate-limited."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import uuid

import pytest
from django.test import Client

from dashboards.models import AuditEntry
from factories import make_checkpoint
from fixture_paths import REPO_DIR
from url_catalogue import all_url_names, reverse_with_ids

pytestmark = pytest.mark.django_db

# Machine endpoints authenticate with a token header, which a cross-site form cannot send.
TOKEN_URL_PREFIXES = ("api-",)


def test_production_settings_pass_the_deploy_check_with_no_warning():
    # The browser tests' conftest allows async-unsafe ORM calls in this process; a deployment never does.
    inherited = {key: value for key, value in os.environ.items() if key != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    env = {
        **inherited,
        "CKPTWEB_DEBUG": "false",
        "CKPTWEB_SECRET_KEY": secrets.token_urlsafe(50),
        "CKPTWEB_ALLOWED_HOSTS": "ckptweb.example",
    }
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stdout + result.stderr


def test_a_post_without_a_csrf_token_is_refused_everywhere(admin_user):
    checkpoint = make_checkpoint(name="orders", url="/nowhere")
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    names = [n for n in all_url_names() if not n.split(":")[-1].startswith(TOKEN_URL_PREFIXES)]
    assert "dashboards:maintenance-confirm" in names and "login" in names

    refused = {name: client.post(reverse_with_ids(name, checkpoint.pk), {}).status_code for name in names}

    assert {name: code for name, code in refused.items() if code != 403} == {}


@pytest.fixture
def fresh_name() -> str:
    """A user name no earlier run counted failures for (the counters outlive a run in Redis)."""
    return f"user-{uuid.uuid4().hex[:12]}"


def test_logins_from_one_address_are_refused_after_the_limit_even_with_the_right_password(
    client, django_user_model, settings, fresh_name
):
    settings.LOGIN_FAILURES_LIMIT = 3
    django_user_model.objects.create_user(fresh_name, password="the-right-password")
    for attempt in range(3):
        assert client.post("/login/", {"username": fresh_name, "password": f"wrong-{attempt}"}).status_code == 200

    refused = client.post("/login/", {"username": fresh_name, "password": "the-right-password"})

    assert refused.status_code == 429
    assert "_auth_user_id" not in client.session
    assert AuditEntry.objects.filter(event="login-failed", actor_name=fresh_name).count() == 4


def test_a_successful_login_clears_the_count(client, django_user_model, settings, fresh_name):
    settings.LOGIN_FAILURES_LIMIT = 2
    django_user_model.objects.create_user(fresh_name, password="the-right-password")
    client.post("/login/", {"username": fresh_name, "password": "wrong"})
    assert client.post("/login/", {"username": fresh_name, "password": "the-right-password"}).status_code == 302
    client.logout()

    client.post("/login/", {"username": fresh_name, "password": "wrong"})

    assert client.post("/login/", {"username": fresh_name, "password": "the-right-password"}).status_code == 302
