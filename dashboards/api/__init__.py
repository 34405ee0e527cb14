"""The JSON API: the read API (/api/v1/), the progress ingest endpoint and their schema."""
