"""Audit entries for events Django signals rather than our code paths: failed logins."""

from __future__ import annotations

from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver

from dashboards.models import AuditEntry

# Django passes the credentials with secrets already replaced by "****"; only the user name is kept.
USERNAME_FIELD = "username"


@receiver(user_login_failed, dispatch_uid="ckptweb-audit-login-failed")
def audit_login_failure(sender, credentials: dict, request=None, **kwargs) -> None:
    name = str(credentials.get(USERNAME_FIELD, ""))[:150]
    address = request.META.get("REMOTE_ADDR", "") if request is not None else ""
    AuditEntry.record(
        AuditEntry.Event.LOGIN_FAILED,
        actor_name=name or "(no user name)",
        detail=f"from {address or 'unknown address'}",
    )
