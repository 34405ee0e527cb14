"""Counts on the maintenance run panel with the noun that goes with them."""

from __future__ import annotations

import pytest
from django.template.loader import render_to_string


@pytest.mark.parametrize(("done", "total", "text"), [(0, 1, "0 of 1 step<"), (2, 3, "2 of 3 steps<")])
def test_a_run_counts_its_steps_in_the_right_number(done, total, text):
    run = {"status": "running", "steps_done": done, "steps_total": total, "progress_percent": 0}

    assert text in render_to_string("dashboards/partials/maintenance_run.html", {"run": run})


def test_a_plan_says_the_space_it_frees_in_kb():
    run = {"status": "planned"}
    plan = {"writes": [], "deletes": [{}, {}], "bytes_freed": 4_403}

    page = render_to_string("dashboards/partials/maintenance_run.html", {"run": run, "plan": plan})

    assert "<dt>Space freed</dt><dd>4.3 KB</dd>" in page
