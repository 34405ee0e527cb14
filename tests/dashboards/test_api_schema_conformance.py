"""Every operation of the OpenAPI schema, called on a live server by schemathesis, answers as documented.

Schemathesis (its command line, as a team would run it) reads /api/schema/ from pytest-django's
live server and, for every operation, sends the schema's examples, the coverage phase's boundary
and invalid values, Hypothesis-generated requests and linked sequences; each answer must have a
documented status code, content type, headers and body, valid input must be accepted and invalid
input refused, and nothing may answer 500. The data is a real synced checkpoint with Spark's
progress, an open finding and a planned maintenance run; the path's checkpoint_id is that
checkpoint's id half of the time. The token's user may ingest (and, like any
user, read), so POST /api/ingest/progress/ is called too.

Bounded and deterministic: at most MAX_EXAMPLES generated requests per operation in the fuzzing
phase and STATEFUL_SCENARIOS sequences, one worker, and schemathesis's deterministic mode
(Hypothesis derandomized: the same requests on every run). The coverage phase sends every boundary
and invalid value the schema defines, a fixed set. About 1,500 requests in all.
"""

from __future__ import annotations

import json
import subprocess
import sys
from xml.etree import ElementTree

import pytest
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator

from dashboards.models import BatchProgress, Checkpoint, Finding, MaintenanceRun
from fixture_paths import KILLED_MID_BATCH
from ui_helpers import SCREENSHOT_DIR
from workers.checkpoint.progress import progress_from_dict

pytestmark = pytest.mark.django_db(transaction=True)

MAX_EXAMPLES = 30
# Sequences of linked calls (a list's id fed to the detail, a stored progress read back).
STATEFUL_SCENARIOS = 20
RUN_TIMEOUT_SECONDS = 900
# The part of schemathesis.toml that does not depend on the test's data.
CONFIG = """
workers = 1
request-timeout = 60
[generation]
max-examples = {max_examples}
deterministic = true
database = "none"
[phases.stateful.generation]
max-examples = {stateful_scenarios}
[dictionaries.stored-checkpoints]
values = [{checkpoint_id}]
[parameters]
"path.checkpoint_id" = {{ dictionary = "stored-checkpoints", probability = 0.5 }}
"""


@pytest.fixture
def api_data(killed_synced) -> Checkpoint:
    """The killed fixture synced, Spark's progress of its run, an open finding and a planned run."""
    report = json.loads((KILLED_MID_BATCH / "spark-report.json").read_text())
    for event in report["progress"]:
        BatchProgress.objects.store(
            progress_from_dict(event, source="spark-report.json"), origin=BatchProgress.Origin.LISTENER
        )
    Finding.objects.create(
        checkpoint=killed_synced,
        code="missing-commit",
        path="commits/6",
        severity=Finding.Severity.WARNING,
        message="m",
    )
    plan = {
        "summary": "delete 1 file",
        "writes": [],
        "deletes": [{"path": "offsets/0", "size": 10, "reason": "old"}],
        "bytes_freed": 10,
    }
    MaintenanceRun.objects.create(
        checkpoint=killed_synced,
        action="purge",
        status=MaintenanceRun.Status.PLANNED,
        plan=plan,
        planned_at=timezone.now(),
    )
    return killed_synced


def run_schemathesis(schema_url: str, token: str, config_file, report_file) -> subprocess.CompletedProcess:
    """Run schemathesis's command line in the config file's folder (it keeps a cache in ./.schemathesis)."""
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(config_file),
        "--no-color",
        "run",
        schema_url,
        "--header",
        f"Authorization: Token {token}",
        "--report",
        "junit",
        "--report-junit-path",
        str(report_file),
    ]
    return subprocess.run(
        command,
        cwd=config_file.parent,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_SECONDS,
        check=False,
    )


def documented_operations() -> set[str]:
    """Every operation of the schema as schemathesis names it: "GET /api/v1/"."""
    schema = SchemaGenerator().get_schema(public=True)
    return {f"{method.upper()} {path}" for path, operations in schema["paths"].items() for method in operations}


def test_every_documented_operation_answers_as_its_schema_says(
    live_server, api_data, pipeline_token, eager_celery, tmp_path
):
    config_file = tmp_path / "schemathesis.toml"
    config_file.write_text(
        CONFIG.format(max_examples=MAX_EXAMPLES, stateful_scenarios=STATEFUL_SCENARIOS, checkpoint_id=api_data.pk)
    )
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    # The JUnit report (a test case per operation, with its time) stays for a human to read.
    report_file = SCREENSHOT_DIR / "schemathesis-junit.xml"
    report_file.unlink(missing_ok=True)

    result = run_schemathesis(f"{live_server.url}/api/schema/?format=json", pipeline_token, config_file, report_file)

    assert result.returncode == 0, result.stdout[-20_000:] + result.stderr[-5_000:]
    cases = {case.get("name"): case for case in ElementTree.parse(report_file).iter("testcase")}
    assert documented_operations() <= set(cases) and len(documented_operations()) == 10
    outcomes = {
        name: [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        for name, case in cases.items()
    }
    assert {name: tags for name, tags in outcomes.items() if tags} == {}
