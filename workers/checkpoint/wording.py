"""Sizes and counts in the words people write: "4.3 KB", "512 B", "1 file", "3 snapshots".

Plan summaries and findings are read on pages and in the audit trail; the dashboards' template
filters write sizes with the same function, so a size reads the same wherever it is shown.
"""

from __future__ import annotations

BYTES_PER_KB = 1_024
SIZE_UNITS = ("B", "KB", "MB", "GB", "TB")


def format_size(size_bytes: float) -> str:
    """A byte count in the largest unit it reaches, 1 KB being 1,024 bytes: "512 B", "4.3 KB", "1.5 GB"."""
    size, unit = float(size_bytes), 0
    while abs(size) >= BYTES_PER_KB and unit < len(SIZE_UNITS) - 1:
        size, unit = size / BYTES_PER_KB, unit + 1
    return f"{size:,.0f} B" if unit == 0 else f"{size:,.1f} {SIZE_UNITS[unit]}"


def plural(count: int, noun: str, nouns: str = "") -> str:
    """``count`` and the noun that goes with it: "1 file", "3 files", "2 batches" (``nouns`` if not noun + "s")."""
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"
