"""gzip for every answer but the admin's: pages, chart JSON, the API and /metrics.

BREACH reads a secret out of a compressed HTTPS body that also reflects text an attacker chooses,
from the sizes of many answers. Our pages carry one secret, the CSRF token, which Django masks
afresh in every response, so there is no fixed string to guess; GZipMiddleware also pads each
answer with up to 100 random bytes (Heal The Breach). The admin is left uncompressed: its API token
list shows fixed secrets beside a search box that echoes the query. Session cookies travel in
headers, which are never compressed.
"""

from __future__ import annotations

from django.middleware.gzip import GZipMiddleware
from django.urls import reverse

ADMIN_URL_NAME = "admin:index"


class GZipOutsideAdminMiddleware(GZipMiddleware):
    def process_response(self, request, response):
        if request.path.startswith(reverse(ADMIN_URL_NAME)):
            return response
        return super().process_response(request, response)
