"""The audit in a real browser: real agents talk, a human filters, reads a message, exports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from a2a.client import A2AClientError
from playwright.async_api import expect

from a2a_core.asyncdb import db
from a2a_core.models import AuditEvent
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import request, send
from tests.e2e.conftest import shot

pytestmark = pytest.mark.live

ROWS = "#audit-rows tr[data-message]"
LONG_NAME = "orchestrator-for-the-quarterly-billing-reconciliation-pipeline-x"


async def _traffic(hub, sdk) -> None:
    """alpha and beta talk to echo; the policy refuses gamma."""
    await db(
        policy_publish,
        document={"matrix": [{"caller": "gamma", "target": "echo", "action": "deny"}]},
        reason="gamma may not call echo",
        actor_label="test",
    )
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    _, beta = await hub.caller("beta")
    _, gamma = await hub.caller("gamma")
    await send(await sdk("echo", alpha), request("echo hello from alpha"))
    await send(await sdk("echo", alpha), request("echo <b>bold</b> claims from alpha"))
    await send(await sdk("echo", beta), request("echo hello from beta"))
    with pytest.raises(A2AClientError):
        await send(await sdk("echo", gamma), request("echo let me in"))


async def test_filter_the_audit_read_a_message_and_export_what_matches(
    hub, sdk, dashboard, tmp_path: Path
):
    await _traffic(hub, sdk)
    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/audit/")
    rows = page.locator(ROWS)
    # Three requests delivered (echo answers with artifacts), one refused.
    await expect(rows).to_have_count(4)
    await shot(page, "audit")

    # By agent: what alpha sent and received.
    await page.fill("input[name=agent]", "alpha")
    await page.press("input[name=agent]", "Enter")
    await expect(rows).to_have_count(2)
    for text in await rows.all_inner_texts():
        assert "alpha" in text and "beta" not in text and "gamma" not in text
    assert "agent=alpha" in page.url  # the filters are in the address: bookmarkable

    # By agent and decision: gamma's refusal, with the coordinator's reason.
    await page.fill("input[name=agent]", "gamma")
    await page.select_option("select[name=decision]", "reject")
    await expect(rows).to_have_count(1)
    await expect(rows.first).to_contain_text("denied_by_matrix")
    await expect(rows.first).to_contain_text("echo let me in")
    await shot(page, "audit-filtered")

    # A bad date is refused next to its field (the URL can say anything).
    await page.goto(f"{hub.url}/audit/?since=tomorrow")
    await expect(page.locator("#error-since")).to_have_text("Enter a valid date/time.")
    await page.go_back()
    await expect(rows).to_have_count(1)

    # The export carries the same filters.
    async with page.expect_download() as caught:
        await page.click("#export-log")
    download = await caught.value
    assert download.suggested_filename.startswith("a2a-audit-")
    saved = tmp_path / download.suggested_filename
    await download.save_as(saved)
    log = [json.loads(line) for line in saved.read_text().splitlines()]
    assert len(log) == 1
    assert log[0]["from"] == "gamma" and log[0]["to"] == "echo"
    assert log[0]["type"] == "request"
    assert log[0]["messageSummary"] == "echo let me in"
    assert log[0]["policyDecision"]["action"] == "reject"
    assert log[0]["policyDecision"]["reason"] == "denied_by_matrix"
    assert log[0]["responseReceived"] is False and log[0]["taskId"] is None
    events = await db(lambda: list(AuditEvent.objects.filter(action="audit.export.messages")))
    assert [e.data["rows"] for e in events] == [1]
    assert events[0].data["filters"] == {"agent": "gamma", "decision": "reject"}

    # The message in full.
    await rows.first.locator("td.summary a").click()
    await page.wait_for_url("**/messages/*/")
    document = json.loads(await page.locator("#message-json").inner_text())
    assert document["message"]["parts"] == [{"text": "echo let me in"}]
    assert document["hub"]["decision"]["reason"] == "denied_by_matrix"
    assert document["task"] is None
    await shot(page, "message-json")


async def test_a_delivered_message_links_to_its_task_and_its_text_stays_text(
    hub, sdk, dashboard, tmp_path: Path
):
    await _traffic(hub, sdk)
    _, long_named = await hub.caller(LONG_NAME)
    await send(await sdk("echo", long_named), request("echo " + "a rather long request " * 12))
    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/audit/")
    await expect(page.locator(ROWS)).to_have_count(5)
    await expect(page.locator(ROWS).first).to_contain_text(LONG_NAME)
    await shot(page, "audit-long-names")

    await page.goto(f"{hub.url}/audit/?q=bold")
    rows = page.locator(ROWS)
    await expect(rows).to_have_count(1)
    # Markup an agent sent is shown as text, not rendered.
    await expect(rows.first.locator("td.summary")).to_contain_text("<b>bold</b>")
    assert await page.locator("#audit-rows b").count() == 0
    await rows.first.locator("td.summary a").click()
    await page.wait_for_url("**/messages/*/")
    document = json.loads(await page.locator("#message-json").inner_text())
    task_id = document["task"]["id"]
    assert document["task"]["state"] == "completed"
    await expect(page.locator(f'a[href="/tasks/{task_id}/"]')).to_be_visible()

    # The training export: each task's conversation, with echo's answer.
    await page.goto(f"{hub.url}/audit/?agent=alpha")
    async with page.expect_download() as caught:
        await page.click("#export-training")
    download = await caught.value
    saved = tmp_path / download.suggested_filename
    await download.save_as(saved)
    examples = [json.loads(line) for line in saved.read_text().splitlines()]
    assert len(examples) == 2
    assert examples[0]["messages"][0]["text"] == "echo hello from alpha"
    assert examples[0]["outcome"]["state"] == "completed"
    assert examples[0]["outcome"]["artifacts"][0]["text"] == "echo: hello from alpha"
    assert examples[0]["metadata"]["agent"] == "echo"
    assert examples[0]["metadata"]["caller"] == "alpha"
