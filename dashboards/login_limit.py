"""The login page with a limit on failed attempts per client address and user name.

After LOGIN_FAILURES_LIMIT failures within LOGIN_FAILURES_WINDOW_SECONDS, the page answers 429
without checking the password until the window ends; each refusal is an audit entry. A success
clears the count. The counters live in Django's cache (Redis when configured).
"""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.contrib.auth.views import LoginView
from django.core.cache import cache
from django.http import HttpResponse

from dashboards.models import AuditEntry


def _key(request) -> str:
    name = request.POST.get("username", "").strip().lower()
    address = request.META.get("REMOTE_ADDR", "")
    return "login-failures:" + hashlib.sha256(f"{address}\0{name}".encode()).hexdigest()


class LimitedLoginView(LoginView):
    def post(self, request, *args, **kwargs):
        key = _key(request)
        if cache.get(key, 0) >= settings.LOGIN_FAILURES_LIMIT:
            AuditEntry.record(
                AuditEntry.Event.LOGIN_FAILED,
                actor_name=request.POST.get("username", "")[:150] or "(no user name)",
                detail="refused without checking: too many failures from "
                f"{request.META.get('REMOTE_ADDR', 'unknown address')}",
            )
            return HttpResponse("Too many failed logins; try again later.", status=429, content_type="text/plain")
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        key = _key(self.request)
        cache.add(key, 0, timeout=settings.LOGIN_FAILURES_WINDOW_SECONDS)
        cache.incr(key)
        return super().form_invalid(form)

    def form_valid(self, form):
        cache.delete(_key(self.request))
        return super().form_valid(form)
