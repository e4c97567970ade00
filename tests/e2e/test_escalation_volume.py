"""The inbox at volume, in real browsers: a few hundred held messages (most inserted through
the services the hub holds them with, some sent by real agents through the live hub). The last
item is reachable, "select all matching" approves a view and its agents receive their
messages, a second window sees the decided items go, a claim holds under the holding setting,
and a deep link opens its item, where the edit shows as a diff."""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import pytest
from a2a.types.a2a_pb2 import TaskState
from django.db import transaction
from django.utils import timezone
from playwright.async_api import Page, expect

from a2a_core.asyncdb import db
from a2a_core.models import Escalation, EscalationStatus, Message
from a2a_core.policy.decide import Decision
from a2a_core.services.escalations import escalation_hold
from a2a_core.services.policy import policy_publish
from tests.a2a_core.protocol.helpers import eventually, request, send
from tests.e2e.conftest import live, shot
from tests.factories import _agent, make_task, register

pytestmark = pytest.mark.live

# Held through the services (volume), and sent by real agents through the hub.
INSERTED = 230
REAL = {"alpha": "echo", "beta": "relay"}
REAL_EACH = 12


@dataclass
class Crowd:
    targets: dict[str, Any]  # slug -> ScriptedAgent
    real: dict[str, list[str]]  # caller -> the texts it sent (held)
    total: int


def insert_held(count: int) -> None:
    """`count` held messages from gamma and delta, recorded and held as the hub does."""
    callers = [register(slug).agent for slug in ("gamma", "delta")]
    targets = [_agent("echo"), _agent("relay")]
    decision = Decision("hold", "approval_required", "matrix rule needs approval")
    for i in range(count):
        caller, target = callers[i % 2], targets[i % 2]
        with transaction.atomic():
            task = make_task(
                target=target,
                caller=caller,
                context_id=f"ctx-bulk-{i}",
                path=[caller.slug, target.slug],
                deadline=timezone.now() + timedelta(hours=1),
            )
            message = Message.objects.create(
                message_id=f"bulk-{i}",
                role="user",
                kind="request",
                parts=[{"text": f"scale service-{i}"}],
                summary=f"scale service-{i}",
                sender=caller,
                target=target,
                task=task,
                context_id=task.context_id,
                decision="hold",
                decision_reason="approval_required",
                delivery_state="held",
            )
            escalation_hold(task=task, message=message, decision=decision, caller=caller)


@pytest.fixture
async def crowd(hub, sdk) -> Crowd:
    await db(
        policy_publish,
        document={
            "matrix": [
                {"caller": caller, "target": target, "action": "approve"}
                for caller, target in REAL.items()
            ]
        },
        reason="hold the real agents' messages",
        actor_label="test",
    )
    targets = {slug: (await hub.endpoint_agent(slug))[0] for slug in ("echo", "relay")}
    real: dict[str, list[str]] = {}
    gate = asyncio.Semaphore(6)

    async def hold(client: Any, text: str) -> None:
        async with gate:
            task = await send(client, request(text))
            assert task.status.state == TaskState.TASK_STATE_AUTH_REQUIRED

    sends = []
    for caller, target in REAL.items():
        _, token = await hub.caller(caller)
        client = await sdk(target, token)
        real[caller] = [f"{caller} asks {target} #{i}" for i in range(REAL_EACH)]
        sends += [hold(client, text) for text in real[caller]]
    await asyncio.gather(*sends)
    await db(insert_held, INSERTED)
    return Crowd(targets=targets, real=real, total=INSERTED + REAL_EACH * len(REAL))


def received(agent: Any) -> list[str]:
    return [m["parts"][0]["text"] for m in agent.state.messages]


def lines(page: Page) -> Any:
    return page.locator("#escalation-list .pending-lines tr.escalation.pending")


async def inbox(page: Page, url: str, query: str = "") -> None:
    await page.goto(f"{url}/escalations/{query}")
    await live(page)


async def test_the_last_item_is_reachable_and_select_all_matching_approves_what_agents_receive(
    hub, dashboard, crowd
):
    operator = await dashboard("operator")
    await inbox(operator, hub.url)
    await expect(operator.locator("#pending-total")).to_have_text(str(crowd.total))
    await expect(lines(operator)).to_have_count(100)
    await shot(operator, "escalation-dense-list")

    # The oldest item is the last of the default order (most urgent, then newest first).
    oldest = await db(
        lambda: Escalation.objects.filter(status="pending").order_by("created_at", "pk").first()
    )
    await operator.click("a[rel=last]")
    await expect(lines(operator).last).to_have_attribute("id", f"escalation-{oldest.pk}")
    await operator.click("a[rel=prev]")
    await expect(lines(operator)).to_have_count(100)
    await operator.click("a[rel=first]")
    await expect(operator.locator("a[rel=prev]")).to_have_count(0)

    # A colleague watches the oldest first: the real agents' messages are on its first page.
    colleague = await dashboard("operator")
    await inbox(colleague, hub.url, "?sort=oldest")
    alpha_lines = colleague.locator("tr.escalation.pending", has_text="alpha asks echo")
    await expect(alpha_lines).to_have_count(REAL_EACH)

    # Select all that alpha asked (a view of 12, on the server), confirmed with the count.
    await operator.select_option("select[name=agent]", "alpha")
    await expect(operator.locator("#pending-total")).to_have_text(str(REAL_EACH))
    await operator.click("#bulk-matching")
    await expect(operator.locator("#bulk-count")).to_have_text(f"all {REAL_EACH} matching")
    asked: list[str] = []

    async def confirm(dialog: Any) -> None:
        asked.append(dialog.message)
        await dialog.accept()

    operator.on("dialog", confirm)
    await operator.click("#bulk button[value=approve]")
    await expect(operator.locator("#bulk-notice")).to_have_text(
        f"Approved {REAL_EACH} of {REAL_EACH}."
    )
    assert asked == [f"Approve all {REAL_EACH} escalations matching this view?"]

    # Each agent receives its message; the colleague's page drops the decided lines.
    echo = crowd.targets["echo"]
    await eventually(lambda: _all_in(crowd.real["alpha"], received(echo)), within=30)
    await expect(alpha_lines).to_have_count(0)
    await expect(colleague.locator("#pending-total")).to_have_text(str(crowd.total - REAL_EACH))
    statuses = await db(
        lambda: set(Escalation.objects.filter(agent__slug="alpha").values_list("status", flat=True))
    )
    assert statuses == {EscalationStatus.APPROVED}


async def _all_in(wanted: list[str], got: list[str]) -> bool:
    return set(wanted) <= set(got)


async def test_under_hold_a_claimed_item_is_not_decided_by_another_until_taken_over(
    hub, dashboard, crowd, settings
):
    settings.HUB_ESCALATION_CLAIMS = "hold"
    first = await db(lambda: Escalation.objects.filter(agent__slug="beta").order_by("pk").first())
    dana = await dashboard("operator", name="dana")
    erin = await dashboard("operator", name="erin")
    await dana.goto(f"{hub.url}/escalations/{first.pk}/")
    await live(dana)
    await dana.click(f"#escalation-{first.pk} .act-claim")
    await expect(dana.locator(f"#escalation-{first.pk} .claimed-by")).to_have_text("you are on it")

    await erin.goto(f"{hub.url}/escalations/{first.pk}/")
    item = erin.locator(f"#escalation-{first.pk}")
    await expect(item.locator(".held-claim")).to_contain_text(
        "Claimed by dana: only they decide it"
    )
    await expect(item.locator(".act-approve")).to_have_count(0)

    # A bulk decision by erin skips it, and says why.
    await inbox(erin, hub.url, "?agent=beta&view=list")
    await erin.check(f"#escalation-{first.pk} input.pick")
    await erin.fill("#bulk input[name=reason]", "not now")
    await erin.click("#bulk-reject")
    notice = erin.locator("#bulk-notice")
    await expect(notice).to_contain_text("Rejected 0 of 1.")
    await expect(notice).to_contain_text(
        f"#{first.pk}: escalation {first.pk} is claimed by dana: only they decide it"
    )
    assert (await db(lambda: Escalation.objects.get(pk=first.pk).status)) == "pending"

    # Taken over, it is erin's to decide.
    await erin.goto(f"{hub.url}/escalations/{first.pk}/")
    await erin.click(f"#escalation-{first.pk} .act-claim")
    await expect(item.locator(".claimed-by")).to_have_text("you are on it")
    # Dana's open page of the item follows live: it is erin's now.
    await expect(dana.locator("#escalation-claimer")).to_contain_text("erin")
    await expect(dana.locator(f"#escalation-{first.pk} .held-claim")).to_contain_text(
        "Claimed by erin"
    )
    await erin.click(f"#escalation-{first.pk} .act-approve")
    await expect(item.locator(".outcome")).to_contain_text("Approved by erin")
    relay = crowd.targets["relay"]
    said = await db(lambda: Escalation.objects.get(pk=first.pk).message.summary)
    await eventually(lambda: _all_in([said], received(relay)), within=30)


async def test_a_deep_link_opens_its_item_and_its_edit_shows_as_a_diff(hub, dashboard, crowd):
    # The oldest service-held item: far past the first page of the list.
    deep = await db(lambda: Escalation.objects.filter(agent__slug="gamma").order_by("pk").first())
    operator = await dashboard("operator")
    # A link to it in the list, as notifications wrote them, opens its page: it is not on
    # the list's first page.
    await operator.goto(f"{hub.url}/escalations/#escalation-{deep.pk}")
    await expect(operator).to_have_url(f"{hub.url}/escalations/{deep.pk}/")
    await operator.goto(f"{hub.url}/escalations/{deep.pk}/")
    await expect(operator.locator("h1")).to_have_text(f"Escalation #{deep.pk}")
    item = operator.locator(f"#escalation-{deep.pk}")
    await expect(item.locator("pre.said")).to_have_text("scale service-0")
    await expect(operator.locator("#escalation-payload")).to_contain_text(
        '"text": "scale service-0"'
    )
    await shot(operator, "escalation-item-page")

    await item.locator("details.edit summary").click()
    await item.locator("details.edit textarea").fill("scale service-0 to 3 replicas")
    await item.locator("details.edit button[type=submit]").click()
    await expect(item.locator(".outcome")).to_contain_text("Approved by operator")
    await operator.reload()
    diff = operator.locator(".edit-diff")
    await expect(diff.locator("pre.original")).to_have_text("scale service-0")
    await expect(diff.locator("pre.edited")).to_have_text("scale service-0 to 3 replicas")
    await expect(diff.locator(".diff .del")).to_have_text("- scale service-0")
    await expect(diff.locator(".diff .ins")).to_have_text("+ scale service-0 to 3 replicas")
    await expect(operator.locator("#escalation-decider")).to_contain_text("operator")
    await expect(operator.locator("#escalation-history")).to_contain_text("after editing it")
    await diff.scroll_into_view_if_needed()
    await shot(operator, "escalation-edit-diff")
    # The list links to the page.
    await inbox(operator, hub.url, "?agent=gamma&sort=oldest&view=list")
    await operator.locator("tr.escalation a.open").first.click()
    await expect(operator).to_have_url(re.compile(r"/escalations/\d+/$"))
