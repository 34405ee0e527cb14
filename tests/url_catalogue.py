"""Every named URL of the project, for tests that must cover all of them (access, CSRF)."""

from __future__ import annotations

from django.urls import NoReverseMatch, URLPattern, URLResolver, get_resolver, reverse


def all_url_names(resolver=None, namespace: str = "") -> list[str]:
    """Names of every URL pattern outside the admin, with their namespace."""
    names = []
    for entry in (resolver or get_resolver()).url_patterns:
        if isinstance(entry, URLResolver) and entry.namespace != "admin":
            names += all_url_names(entry, f"{entry.namespace}:" if entry.namespace else namespace)
        elif isinstance(entry, URLPattern) and entry.name:
            names.append(namespace + entry.name)
    return names


def reverse_with_ids(name: str, checkpoint_id: int) -> str:
    """The URL of ``name`` with the checkpoint's id and 0 for any further id."""
    for args in ([], [checkpoint_id], [checkpoint_id, 0]):
        try:
            return reverse(name, args=args)
        except NoReverseMatch:
            continue
    raise AssertionError(f"cannot reverse {name}")
