"""Deciding where people are told. A fake Slack clicks the Approve button of the message the
live hub posted, with a correctly signed interaction: the item is approved under the mapped
hub user's name, and the agent gets the message. A bad signature, a stale or replayed
timestamp, or an unmapped user changes nothing and gets 401/403. An email's links need that
user's login, ask to confirm, work once, and expire."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import re
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from django.test import Client

from a2a_core.asyncdb import db
from a2a_core.models import AuditEvent, Escalation, TaskState
from a2a_core.services.users import user_create
from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.notify.conftest import hold, holding
from tests.a2a_core.protocol.helpers import eventually

pytestmark = pytest.mark.live

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
MAPPED, UNMAPPED, VIEWER = "U024BE7LH", "U0UNKNOWN", "U0VIEWER1"
PASSWORD = "a-long-test-password-2026"


@pytest.fixture
def slack_on(quick) -> Any:
    quick.HUB_SLACK_SIGNING_SECRET = SECRET
    quick.HUB_SLACK_USERS = {MAPPED: "olga", VIEWER: "vic"}
    return quick


def users() -> None:
    user_create(username="olga", password=PASSWORD, role="operator")
    user_create(username="pete", password=PASSWORD, role="operator")
    user_create(username="vic", password=PASSWORD, role="viewer")


def signed(body: bytes, timestamp: int, secret: str = SECRET) -> dict[str, str]:
    """The headers Slack sends: its timestamp, and v0= HMAC-SHA256 of v0:timestamp:body."""
    base = b"v0:" + str(timestamp).encode() + b":" + body
    digest = hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    return {
        "X-Slack-Request-Timestamp": str(timestamp),
        "X-Slack-Signature": f"v0={digest}",
        "Content-Type": "application/x-www-form-urlencoded",
    }


def interaction(button: dict[str, Any], slack_user: str) -> bytes:
    """A block_actions payload as Slack sends it when `slack_user` clicks `button`."""
    payload = {
        "type": "block_actions",
        "user": {"id": slack_user, "username": "someone", "team_id": "T0001"},
        "api_app_id": "A0001",
        "container": {"type": "message", "message_ts": "1548261231.000200"},
        "trigger_id": "12345.98765.abcd2358fdea",
        "response_url": "https://hooks.slack.com/actions/T0001/1/xyz",
        "actions": [
            {
                "type": "button",
                "action_id": button["action_id"],
                "block_id": "b1",
                "value": button["value"],
                "action_ts": "1548426417.840180",
            }
        ],
    }
    return urlencode({"payload": json.dumps(payload)}).encode()


async def click(hub: Any, body: bytes, headers: dict[str, str]) -> httpx.Response:
    async with httpx.AsyncClient() as http:
        return await http.post(f"{hub.url}/notify/slack/actions/", content=body, headers=headers)


async def buttons_of(slack: Any, count: int) -> list[dict[str, dict[str, Any]]]:
    """The Approve/Reject buttons of the first `count` posts, by action."""

    async def posted() -> list[Any]:
        return slack.accepted if len(slack.accepted) >= count else []

    posts = await eventually(posted)
    found = []
    for post in posts[:count]:
        body = json.loads(post.body)
        [section, actions] = body["blocks"]
        assert section["text"]["text"] == body["text"]
        found.append({b["action_id"]: b for b in actions["elements"]})
    return found


async def test_a_signed_slack_click_approves_under_the_mapped_users_name(
    hub, sdk, webhook, slack_on
):
    await db(users)
    slack = webhook()
    await db(a2a, "notify", "add", "webhook", slack.url)
    alpha = await holding(hub, sdk)
    first = await hold(alpha, "deploy the release")
    [buttons] = await buttons_of(slack, 1)
    assert buttons["approve"]["value"] == str(first.pk)
    assert buttons["approve"]["text"]["text"] == "Approve"

    body = interaction(buttons["approve"], MAPPED)
    headers = signed(body, int(time.time()))
    answer = await click(hub, body, headers)
    assert answer.status_code == 200, answer.text
    assert answer.json()["text"] == f"Approved by olga: escalation {first.pk}"
    decided = await db(Escalation.objects.select_related("decided_by", "task").get, pk=first.pk)
    assert (decided.status, decided.decided_by_name) == ("approved", "olga")
    assert decided.decided_by is not None and decided.decided_by.username == "olga"
    audit = await db(AuditEvent.objects.get, action="escalation.approve")
    assert audit.actor_label == "olga"

    async def delivered() -> bool:
        task = await db(lambda: Escalation.objects.select_related("task").get(pk=first.pk).task)
        return task.state == TaskState.COMPLETED

    await eventually(delivered)

    # The same request again (a replay within the five minutes) is refused.
    again = await click(hub, body, headers)
    assert again.status_code == 401
    assert again.json() == {"error": "this request was already received (a replay)"}


async def test_bad_slack_requests_change_nothing(hub, sdk, webhook, slack_on):
    await db(users)
    slack = webhook()
    await db(a2a, "notify", "add", "webhook", slack.url)
    alpha = await holding(hub, sdk)
    item = await hold(alpha, "delete the backups")
    [buttons] = await buttons_of(slack, 1)
    now = int(time.time())
    approve = interaction(buttons["approve"], MAPPED)

    forged = await click(hub, approve, signed(approve, now, secret="not-the-secret"))
    assert (forged.status_code, forged.json()) == (
        401,
        {"error": "the request's signature does not match"},
    )
    stale = await click(hub, approve, signed(approve, now - 600))
    assert (stale.status_code, stale.json()) == (
        401,
        {"error": "the request's timestamp is more than five minutes off"},
    )
    tampered = approve.replace(b"U024BE7LH", b"U024BE7LX")
    moved = await click(hub, tampered, signed(approve, now))
    assert moved.status_code == 401
    stranger = interaction(buttons["approve"], UNMAPPED)
    refused = await click(hub, stranger, signed(stranger, now))
    assert (refused.status_code, refused.json()) == (
        403,
        {"error": f"Slack user {UNMAPPED} is not mapped to a hub user (HUB_SLACK_USERS)"},
    )
    viewer = interaction(buttons["reject"], VIEWER)
    looking = await click(hub, viewer, signed(viewer, now))
    assert (looking.status_code, looking.json()) == (
        403,
        {"error": "vic may not decide escalations"},
    )
    unsigned = await click(hub, approve, {"Content-Type": "application/x-www-form-urlencoded"})
    assert unsigned.status_code == 401

    still = await db(Escalation.objects.get, pk=item.pk)
    assert (still.status, still.decided_by_name) == ("pending", "")
    assert not await db(AuditEvent.objects.filter(action__startswith="escalation.").exists)

    # A reject click from the mapped user is decided, with Slack named as where.
    reject = interaction(buttons["reject"], MAPPED)
    done = await click(hub, reject, signed(reject, now))
    assert done.json()["text"] == f"Rejected by olga: escalation {item.pk}"
    rejected = await db(Escalation.objects.get, pk=item.pk)
    assert (rejected.status, rejected.answer) == ("rejected", "rejected in Slack")


def logged_in(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=PASSWORD)
    return client


def path_of(link: str) -> str:
    return urlsplit(link).path


def email_links(mail: Any) -> dict[str, str]:
    body = mail.get_payload(decode=True).decode()
    return dict(re.findall(r"^(Approve|Reject): (\S+)", body, re.M))


async def test_an_email_link_needs_its_users_login_confirms_and_works_once(hub, sdk, smtp, quick):
    await db(users)
    out = await db(a2a, "notify", "add", "email", "olga@example.com", "--user", "olga")
    assert "links act as olga" in out
    alpha = await holding(hub, sdk)
    item = await hold(alpha, "grant admin to the intern")

    async def mailed() -> list[Any]:
        return smtp.messages

    [mail] = await eventually(mailed)
    links = email_links(mail)
    assert set(links) == {"Approve", "Reject"}
    approve = path_of(links["Approve"])
    assert links["Approve"].startswith(f"{hub.url}/notify/act/")

    def visit() -> None:
        anonymous = Client().get(approve)
        assert anonymous.status_code == 302 and anonymous["Location"].startswith("/login/")
        other = logged_in("pete").post(approve)
        assert other.status_code == 403
        assert "This link was sent to olga: log in as them to use it." in other.content.decode()
        olga = logged_in("olga")
        confirm = olga.get(approve)
        assert confirm.status_code == 200
        page = confirm.content.decode()
        assert "Approve this held message?" in page and "grant admin to the intern" in page
        assert Escalation.objects.get(pk=item.pk).status == "pending"
        done = olga.post(approve)
        assert done.status_code == 200
        assert "Approved by olga. The agent is told." in done.content.decode()
        again = olga.post(approve)
        assert again.status_code == 410
        assert "This link was already used: each link works once." in again.content.decode()
        # The reject link of the same mail: the item is decided already.
        late = olga.post(path_of(links["Reject"]), {"reason": "too late"})
        assert late.status_code == 409
        assert "was already approved by olga." in late.content.decode()

    await db(visit)
    decided = await db(Escalation.objects.select_related("decided_by").get, pk=item.pk)
    assert (decided.status, decided.decided_by_name) == ("approved", "olga")
    assert decided.decided_by is not None and decided.decided_by.username == "olga"
    assert await db(AuditEvent.objects.get, action="escalation.approve") is not None


async def test_an_email_link_expires(hub, sdk, smtp, quick):
    quick.HUB_NOTIFY_LINK_SECONDS = 1
    await db(users)
    await db(a2a, "notify", "add", "email", "olga@example.com", "--user", "olga")
    alpha = await holding(hub, sdk)
    item = await hold(alpha, "open port 22 to the world")

    async def mailed() -> list[Any]:
        return smtp.messages

    [mail] = await eventually(mailed)
    reject = path_of(email_links(mail)["Reject"])
    await asyncio.sleep(2.1)  # past the link's one second

    def visit() -> None:
        expired = logged_in("olga").post(reject, {"reason": "no"})
        assert expired.status_code == 410
        page = expired.content.decode()
        assert "This link has expired: decide in the dashboard instead." in page
        bogus = logged_in("olga").get("/notify/act/not-a-token/")
        assert bogus.status_code == 400
        assert "This is not a link the hub sent." in bogus.content.decode()

    await db(visit)
    assert (await db(Escalation.objects.get, pk=item.pk)).status == "pending"
