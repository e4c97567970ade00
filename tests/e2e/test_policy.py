"""The policy editor in a real browser, with real agents: deny a pair in the grid, see the hub
refuse it, roll back, see it delivered again."""

from __future__ import annotations

import asyncio
import re

import pytest
from a2a.client import A2AClientError
from a2a.types.a2a_pb2 import TaskState
from playwright.async_api import Page, expect

from a2a_core.asyncdb import db
from a2a_core.models import Message, PolicyVersion
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import request, send
from tests.e2e.conftest import live, shot

pytestmark = pytest.mark.live


async def shot_from_top(page: Page, name: str) -> None:
    # htmx scrolls to what changed; the whole page is easier to read from the top.
    await page.evaluate("window.scrollTo(0, 0)")
    await shot(page, name)


async def slow_drafts(page: Page) -> None:
    """The draft's answers (a cell, the summary of unsaved changes) take their time, as on a
    slow network."""

    async def slowly(route) -> None:
        await asyncio.sleep(0.8)
        await route.continue_()

    await page.route("**/policy/draft/", slowly)


async def policy_page(hub, dashboard, *callers: str) -> Page:
    """An admin's policy page, with the echo agent and `callers` in its grid."""
    await hub.endpoint_agent("echo")
    for name in callers:
        await hub.caller(name)
    await db(policy_publish, document={}, reason="the defaults", actor_label="setup")
    page = await dashboard("admin")
    await page.goto(f"{hub.url}/policy/")
    await live(page)
    return page


async def test_an_admin_denies_a_pair_in_the_grid_then_rolls_it_back(hub, sdk, dashboard):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    await hub.caller("research-assistant-with-a-rather-long-name")  # the grid must still fit
    await db(policy_publish, document={}, reason="the defaults, on record", actor_label="setup")
    alpha = await sdk("echo", token)
    for i in range(2):  # recorded traffic for the dry-run
        await send(alpha, request(f"echo warm-up {i}"))

    watcher = await dashboard("viewer")
    await watcher.goto(f"{hub.url}/policy/")
    await live(watcher)
    page = await dashboard("admin")
    await page.goto(f"{hub.url}/policy/")
    await live(page)

    # The pair inherits "allow" from the default; one click makes it the pair's own "deny".
    cell = page.get_by_role("button", name=re.compile(r"^alpha → echo:"))
    await expect(cell).to_have_accessible_name(
        "alpha → echo: allow, the default for pairs without a rule"
    )
    unsaved = page.locator("#policy-changes")
    await expect(unsaved).to_have_text("No unsaved changes")
    await shot_from_top(page, "policy")
    await cell.click()
    await expect(cell).to_have_accessible_name("alpha → echo: deny")
    await expect(unsaved).to_contain_text("Unsaved: 1 change")
    await unsaved.locator("summary").click()
    await expect(unsaved).to_contain_text("alpha → echo: deny (new rule)")
    # The save bar stays on screen however long the page is.
    await expect(page.get_by_role("button", name="Save as a new version")).to_be_in_viewport()

    # What would it change? The two warm-up messages would be refused.
    await page.get_by_role("button", name="Dry-run the draft").click()
    report = page.locator("#dry-run-report")
    await expect(report).to_contain_text("2 would be decided differently")
    await expect(report.get_by_role("row", name="denied_by_matrix 2")).to_be_visible()
    await shot_from_top(page, "policy-dry-run")

    # No reason and a limit of 0: both shown inline, nothing saved.
    await page.get_by_label("Messages per minute").fill("0")
    await page.get_by_role("button", name="Save as a new version").click()
    await expect(page.locator(".form-errors")).to_contain_text("2 problems")
    per_minute = page.locator("label", has=page.locator('input[name="limits.perMinute"]'))
    await expect(per_minute.locator(".field-error")).to_have_text("at least 1")
    await expect(page.locator("label.reason .field-error")).to_contain_text("say why")
    # Both problems are on screen: the first field is scrolled to, the reason is in the bar.
    await expect(page.locator('input[name="limits.perMinute"]')).to_be_in_viewport()
    await expect(page.locator("label.reason .field-error")).to_be_in_viewport()
    await expect(unsaved).to_contain_text("Unsaved changes that are not a valid policy yet")
    await shot(page, "policy-errors-in-view")
    await expect(cell).to_have_accessible_name("alpha → echo: deny")  # the draft is kept
    await shot_from_top(page, "policy-errors")

    await page.get_by_label("Messages per minute").fill("600")
    await page.get_by_label("Reason").fill("alpha floods echo")
    await page.get_by_role("button", name="Save as a new version").click()
    await expect(page.get_by_role("status").first).to_have_text("Policy v2 is active (1 change).")
    await expect(watcher.locator("#live-banner")).to_contain_text("Policy v2 is now active")

    with pytest.raises(A2AClientError, match="-32053"):
        await send(alpha, request("echo are you there?"))
    refused = await db(lambda: Message.objects.filter(decision="reject").get())
    assert refused.decision_reason == "denied_by_matrix"

    # Roll back to v1 from the history.
    await live(page)
    rollback = page.locator("#rollback-1")
    await rollback.get_by_label("Reason").fill("echo must hear alpha again")
    await rollback.get_by_role("button", name="Roll back to v1").click()
    await expect(page.get_by_role("status").first).to_have_text(
        "Rolled back to v1: policy v3 is active."
    )
    v3 = page.locator("#v3")
    await expect(v3).to_contain_text("rollback to v1: echo must hear alpha again")
    await expect(v3.locator("ul.diff")).to_have_text("alpha → echo: rule removed (was deny)")
    await expect(page.locator("#v2 ul.diff")).to_have_text("alpha → echo: deny (new rule)")
    await shot_from_top(page, "policy-history")

    again = await send(alpha, request("echo hello again"))
    assert again.status.state == TaskState.TASK_STATE_COMPLETED


async def test_a_dry_run_of_no_change_reports_zero_and_one_denied_pair_only_its_messages(
    hub, sdk, dashboard
):
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    _, beta = await hub.caller("beta")
    await db(policy_publish, document={}, reason="the defaults", actor_label="setup")
    for i in range(2):
        await send(await sdk("echo", alpha), request(f"echo alpha {i}"))
        await send(await sdk("echo", beta), request(f"echo beta {i}"))
    page = await dashboard("admin")
    await page.goto(f"{hub.url}/policy/")
    await live(page)
    report = page.locator("#dry-run-report")

    await page.get_by_role("button", name="Dry-run the draft").click()
    await expect(report.locator(".dry-run-changed")).to_have_text("0")

    await page.get_by_role("button", name=re.compile(r"^beta → echo:")).click()
    await page.get_by_role("button", name="Dry-run the draft").click()
    await expect(report.locator(".dry-run-changed")).to_have_text("2")
    examples = report.locator("tbody tr td.pair")
    await expect(examples).to_have_text(["beta→echo", "beta→echo"])
    await shot_from_top(page, "policy-dry-run-one-pair")


async def test_a_dry_run_clicked_while_a_cell_change_is_on_its_way_includes_that_change(
    hub, sdk, dashboard
):
    await hub.endpoint_agent("echo")
    _, beta = await hub.caller("beta")
    await db(policy_publish, document={}, reason="the defaults", actor_label="setup")
    for i in range(2):
        await send(await sdk("echo", beta), request(f"echo beta {i}"))
    page = await dashboard("admin")
    await page.goto(f"{hub.url}/policy/")
    await live(page)

    await slow_drafts(page)
    await page.get_by_role("button", name=re.compile(r"^beta → echo:")).click()
    await page.get_by_role("button", name="Dry-run the draft").click()

    report = page.locator("#dry-run-report")
    await expect(report.locator(".dry-run-changed")).to_have_text("2")
    await expect(page.get_by_role("button", name=re.compile(r"^beta → echo: deny"))).to_be_visible()


async def test_save_clicked_while_the_changes_summary_is_on_its_way_saves_the_draft(hub, dashboard):
    page = await policy_page(hub, dashboard, "beta")
    await page.get_by_role("button", name=re.compile(r"^beta → echo:")).click()
    unsaved = page.locator("#policy-changes")
    await expect(unsaved).to_contain_text("Unsaved: 1 change")

    # Each field's change asks for the summary of unsaved changes, slowly; Save comes first.
    await slow_drafts(page)
    await page.get_by_label("Messages per minute").fill("900")
    await page.get_by_label("Reason").fill("beta floods echo")
    await page.get_by_role("button", name="Save as a new version").click()

    await expect(page.get_by_role("status").first).to_have_text("Policy v2 is active (2 changes).")
    await expect(unsaved).to_have_text("No unsaved changes")


async def test_two_cells_clicked_then_save_on_a_slow_network_saves_both(hub, dashboard):
    page = await policy_page(hub, dashboard, "beta", "gamma")
    await slow_drafts(page)
    beta = page.get_by_role("button", name=re.compile(r"^beta → echo:"))
    gamma = page.get_by_role("button", name=re.compile(r"^gamma → echo:"))
    await beta.click()
    # While the first cell's answer is on its way the form's buttons wait for it.
    await expect(gamma).to_be_disabled()
    await expect(page.get_by_role("button", name="Save as a new version")).to_be_disabled()
    await gamma.click()
    await page.get_by_label("Reason").fill("two pairs")
    await page.get_by_role("button", name="Save as a new version").click()

    await expect(page.get_by_role("status").first).to_have_text("Policy v2 is active (2 changes).")
    await expect(page.locator("#v2 ul.diff li")).to_have_text(
        ["beta → echo: deny (new rule)", "gamma → echo: deny (new rule)"]
    )


async def test_enter_in_a_field_never_publishes_the_policy_by_surprise(hub, sdk, dashboard):
    await hub.endpoint_agent("echo")
    _, beta = await hub.caller("beta")
    await db(policy_publish, document={}, reason="the defaults", actor_label="setup")
    await send(await sdk("echo", beta), request("echo beta"))
    page = await dashboard("admin")
    await page.goto(f"{hub.url}/policy/")
    await live(page)

    await page.get_by_label("Reason").fill("slow beta down")
    await page.get_by_label("Messages per minute").fill("900")
    await page.get_by_label("Messages per minute").press("Enter")
    # Enter in "Messages to replay" runs the dry-run; the form's requests go in order, so a
    # save the first Enter had sent would be answered before it.
    await page.get_by_label("Messages to replay").fill("50")
    await page.get_by_label("Messages to replay").press("Enter")
    await expect(page.locator("#dry-run-report")).to_contain_text("Replayed the last")
    assert await db(lambda: PolicyVersion.objects.count()) == 1

    # Enter in the reason, beside the Save button, saves.
    await page.get_by_label("Reason").press("Enter")
    await expect(page.get_by_role("status").first).to_have_text("Policy v2 is active (1 change).")
    assert await db(lambda: PolicyVersion.objects.count()) == 2
