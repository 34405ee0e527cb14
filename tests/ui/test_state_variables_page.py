"""A real browser sees the state variables of a transformWithState query (tests/fixtures/tws).

The fixture's query (pipelines/tws_queries.py) wrote 7 rate rows a batch for 4 batches, keyed by
value % 3: 3 keys, each with one count, one list, one TTL'd value and one timer, and both
parities in its map; its list elements add up to the 28 rows written.
"""

from __future__ import annotations

import pytest

from factories import make_checkpoint
from fixture_paths import OUR_FIXTURES
from ui_helpers import SCREENSHOT_DIR, log_in
from workers.sync import sync_checkpoint

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

KEYS = 3
ROWS_WRITTEN = 28


def _cells(page, table: str, variable: str) -> list[str]:
    return page.locator(f"{table} tr[data-variable='{variable}'] td").all_inner_texts()


@pytest.mark.parametrize("variant", ["unsaferow", "avro_format2"])
def test_the_state_panel_and_partition_page_list_every_state_variable(
    browser_page, live_server, copy_checkpoint, django_user_model, eager_celery, variant
):
    django_user_model.objects.create_user("oncall", password="a-long-password")
    base = copy_checkpoint(OUR_FIXTURES / "tws" / variant)
    checkpoint = make_checkpoint(name=f"tws {variant}", url=str(base / "checkpoint"))
    sync_checkpoint(checkpoint.pk)
    page = browser_page

    log_in(page, live_server.url, checkpoint.get_absolute_url(), "oncall", "a-long-password")

    assert page.locator("#state-stores tbody tr td").nth(5).inner_text() == str(KEYS * 5)  # count, list, 2 map, ttl'd
    count = _cells(page, "#state-variables", "count")
    assert count[3:5] == ["ValueState", str(KEYS)] and count[-2:] == ["4", "added 0"]
    assert _cells(page, "#state-variables", "recent")[5] == f"{ROWS_WRITTEN} elements"
    assert _cells(page, "#state-variables", "by_parity")[3:5] == ["MapState", str(KEYS * 2)]
    assert _cells(page, "#state-variables", "$procTimers_keyToTimestamp")[3] == "timers (processing time) (Spark's)"
    assert _cells(page, "#state-variables", "$ttl_last_seen")[3] == "TTL index (Spark's)"
    SCREENSHOT_DIR.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOT_DIR / f"state_variables_{variant}.png"), full_page=True)

    page.click("#state summary")
    page.click("#state-partitions a >> nth=0")
    assert page.locator("#partition-variables tbody tr").count() == 9  # 8 families in the schema, and default
    assert _cells(page, "#partition-variables", "default")[1] == "default (Spark's)"
    assert _cells(page, "#partition-variables", "by_parity")[5:7] == [
        "struct<key:struct<key:bigint>,userKey:struct<parity:string>>",
        "struct<rows:bigint>",
    ]
    page.screenshot(path=str(SCREENSHOT_DIR / f"state_variables_partition_{variant}.png"), full_page=True)

    page.click("text=Decode sample rows")
    page.wait_for_selector("#sample-rows, #sample-error")
    assert page.locator("#sample-error").count() == 0
    first = page.locator("#sample-rows tbody tr").first.locator("td").all_inner_texts()
    assert first[0] == "count" and first[2] == "null"  # a ValueState has no user key
    lists = page.locator("#sample-rows tbody tr", has_text="recent").first.locator("td").all_inner_texts()
    assert lists[3].startswith('[{"value": ')
    parity = page.locator("#sample-rows tbody tr", has_text="by_parity").first.locator("td").all_inner_texts()
    assert parity[2] in ('{"parity": "even"}', '{"parity": "odd"}')
    page.screenshot(path=str(SCREENSHOT_DIR / f"state_variables_sample_{variant}.png"), full_page=True)

    page.goto(f"{live_server.url}/")
    listed = page.locator(f"#checkpoint-table tr[data-checkpoint='tws {variant}'] ul.state-variables")
    count_line = listed.locator("li[data-variable='count']").inner_text()
    assert count_line.startswith(f"count ValueState: {KEYS} rows, ") and count_line.endswith(" B at version 4")
    assert f"{KEYS} rows ({ROWS_WRITTEN} elements)" in listed.locator("li[data-variable='recent']").inner_text()
    assert "+ 5 of Spark's own column families" in listed.inner_text()  # 2 timer, TTL, row counter, default
    page.screenshot(path=str(SCREENSHOT_DIR / f"state_variables_list_{variant}.png"), full_page=True)
