"""Which checkpoint URLs are allowed: a URL split into scheme and normalised path, checked against
the configured roots before anything is opened (a form validates user input with check_allowed).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import PathNotAllowedError

_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
LOCAL_SCHEMES = frozenset({"file", "local"})


@dataclass(frozen=True, slots=True)
class _Location:
    """A URL split into its scheme and a normalised path."""

    protocol: str
    path: str  # local: absolute and normalised; remote: "bucket/key" without '.' or '..'

    @property
    def url(self) -> str:
        return f"{self.protocol}://{self.path}"


def check_allowed(url: str, allowed_roots: Sequence[str] | None) -> str:
    """Return the normalised form of ``url`` after checking it against ``allowed_roots``.

    Opens nothing, so a form can validate user input with it. ``allowed_roots=None`` allows
    every URL; an empty sequence allows none. Raises PathNotAllowedError naming ``url``.
    """
    location = parse_location(url)
    if allowed_roots is None:
        return location.url
    if isinstance(allowed_roots, (str, bytes)):
        raise TypeError("allowed_roots must be a list of root URLs, not one string: wrap it in [...]")
    roots = [parse_location(root) for root in allowed_roots]
    if any(_is_inside(location, root) for root in roots):
        return location.url
    raise PathNotAllowedError(url, _refusal_reason(location, roots))


def parse_location(url: str) -> _Location:
    """Split ``url`` into scheme and path; plain paths are local and made absolute."""
    if not isinstance(url, str):
        raise TypeError(f"a checkpoint URL must be a str, not {type(url).__name__}")
    if not url.strip():
        raise PathNotAllowedError(repr(url), "the checkpoint URL is empty")
    if "::" in url:
        raise PathNotAllowedError(url, "chained fsspec URLs ('::') are not supported")
    protocol, separator, rest = url.partition("://")
    if not separator:
        protocol, rest = "file", url
    protocol = protocol.lower()
    if not _SCHEME.fullmatch(protocol):
        raise PathNotAllowedError(url, f"{protocol!r} is not a URL scheme")
    if protocol in LOCAL_SCHEMES:
        return _Location("file", os.path.normpath(os.path.abspath(rest)))
    return _Location(protocol, _remote_path(url, rest))


def _remote_path(url: str, rest: str) -> str:
    """Normalise the path of a remote URL, where '..' has no meaning the server would resolve."""
    segments = rest.split("/")
    if any(segment in (".", "..") for segment in segments):
        raise PathNotAllowedError(url, "'.' and '..' segments are not allowed in a URL")
    path = "/".join(segment for segment in segments if segment)
    if not path:
        raise PathNotAllowedError(url, "the URL has no path after the scheme")
    return path


def _is_inside(location: _Location, root: _Location) -> bool:
    """Tell whether ``location`` is ``root`` or below it (local paths with symlinks resolved)."""
    if location.protocol != root.protocol:
        return False
    if location.protocol == "file":
        path, root_path = os.path.realpath(location.path), os.path.realpath(root.path)
        return os.path.commonpath([path, root_path]) == root_path
    return location.path == root.path or location.path.startswith(root.path + "/")


def _refusal_reason(location: _Location, roots: list[_Location]) -> str:
    if not roots:
        return "no checkpoint roots are configured"
    if all(root.protocol != location.protocol for root in roots):
        return f"the scheme {location.protocol!r} is not allowed"
    allowed = ", ".join(root.url for root in roots)
    return f"the path is outside the allowed roots ({allowed})"
