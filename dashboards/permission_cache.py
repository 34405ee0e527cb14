"""A user's permissions read from the shared cache instead of two queries on every page.

Why: every page's top bar asks whether the user may register a checkpoint, and Django's
ModelBackend answers from two joins (the user's permissions, its groups'), about 3 ms of the
query page's 22 ms of CPU (docs/benchmarks.md). The sets are kept in the cache under the user and
a generation that every change to a grant moves: a permission or group given or taken (the
m2m_changed of User.groups, User.user_permissions and Group.permissions), a group or permission
removed (its rows go without m2m_changed). A change made outside Django's ORM (raw SQL) reaches
the pages after PERMISSION_CACHE_SECONDS at most.

Only where the cache is shared by every process (settings: Redis): a per-process cache would keep
a taken permission alive in the processes that did not see the change.
"""

from __future__ import annotations

import time

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import Group, Permission
from django.core.cache import cache
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete

PERMISSION_CACHE_SECONDS = 60
GENERATION_KEY = "permissions:generation"


class CachedPermissionsBackend(ModelBackend):
    """ModelBackend with the set of an active user's permissions kept in the cache."""

    def get_all_permissions(self, user_obj, obj=None) -> set[str]:
        if not user_obj.is_active or user_obj.is_anonymous or obj is not None or hasattr(user_obj, "_perm_cache"):
            return super().get_all_permissions(user_obj, obj)
        key = f"permissions:{_generation()}:{user_obj.pk}"
        permissions = cache.get(key)
        if permissions is None:
            permissions = super().get_all_permissions(user_obj)
            cache.set(key, permissions, PERMISSION_CACHE_SECONDS)
        user_obj._perm_cache = permissions
        return permissions


def _generation() -> int:
    """The current generation: a time in ns, so that one set anew (never set, or evicted) is one
    no cached set was stored under."""
    return cache.get_or_set(GENERATION_KEY, time.time_ns, timeout=None)


def forget_permissions(**_kwargs) -> None:
    """Move the generation: every user's cached set is read again on its next check. Now, and
    again once the change commits: a request between the two read the rows as they were."""
    _new_generation()
    transaction.on_commit(_new_generation)


def _new_generation() -> None:
    cache.set(GENERATION_KEY, time.time_ns(), timeout=None)


def connect_receivers() -> None:
    user = get_user_model()
    for through in (user.groups.through, user.user_permissions.through, Group.permissions.through):
        m2m_changed.connect(forget_permissions, sender=through, dispatch_uid=f"forget-permissions-{through.__name__}")
    for model in (Group, Permission):
        post_delete.connect(forget_permissions, sender=model, dispatch_uid=f"forget-permissions-{model.__name__}")
