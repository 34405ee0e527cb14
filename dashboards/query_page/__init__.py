"""The query page: its charts (timeline, runtime, state, files, logs), runs, batch pages and panels."""
