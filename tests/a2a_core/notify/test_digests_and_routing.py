"""Notifications people can live with, through the live hub to real local receivers: 1,000
holds within a minute reach each target as a handful of digests whose counts add up, with
identical items folded and links that open the matching inbox view; a routing rule sends one
pair to one target only; an item nobody answers is passed on to the next target."""

from __future__ import annotations

import asyncio
import json
import math
import re
import time
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

import pytest
from django.contrib.auth.models import User
from django.core.management.base import CommandError
from django.test import Client

from a2a_core.asyncdb import db
from a2a_core.delivery.notify import _about_batch, _webhook_request, notify_claim
from a2a_core.models import Escalation, Notification, NotificationTarget
from a2a_core.services.escalations import escalation_approve
from a2a_core.services.notify import notify_queue
from a2a_core.services.policy import policy_publish
from a2a_core.services.users import user_create
from tests.a2a_core.cli.helpers import a2a
from tests.a2a_core.notify.conftest import hold
from tests.a2a_core.notify.test_notify_through_hub import ABUSIVE
from tests.a2a_core.protocol.helpers import eventually
from tests.factories import held_escalation

pytestmark = pytest.mark.live

INTERVAL = 8


async def two_pairs(hub: Any, sdk: Any) -> tuple[Any, Any]:
    """SDK clients of `alpha` and `beta`, whose messages to `echo` are held for approval."""
    await db(
        policy_publish,
        document={
            "matrix": [
                {"caller": "alpha", "target": "echo", "action": "approve"},
                {"caller": "beta", "target": "echo", "action": "approve"},
            ],
            # 1,000 calls within a minute, most from alpha.
            "limits": {"perMinute": 2000},
        },
        reason="hold alpha -> echo and beta -> echo",
        actor_label="test",
    )
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    _, beta = await hub.caller("beta")
    return await sdk("echo", alpha), await sdk("echo", beta)


async def hold_many(work: list[tuple[Any, str]], at_once: int = 40) -> None:
    gate = asyncio.Semaphore(at_once)

    async def one(client: Any, text: str) -> None:
        async with gate:
            await hold(client, text)

    await asyncio.gather(*(one(client, text) for client, text in work))


def operator_client() -> Client:
    if not User.objects.filter(username="olga").exists():
        user_create(username="olga", password="a-long-test-password-2026", role="operator")
    client = Client()
    assert client.login(username="olga", password="a-long-test-password-2026")
    return client


def open_link(link: str, hub_url: str) -> str:
    """A link from a notification, opened by a logged-in operator."""
    assert link.startswith(hub_url), link
    parts = urlsplit(link)
    response = operator_client().get(f"{parts.path}?{parts.query}")
    assert response.status_code == 200
    return response.content.decode()


def slack_counts(body: dict[str, Any]) -> Counter[str]:
    """Items per pair in a Slack post: a digest's lines, or one item's message."""
    counts: Counter[str] = Counter()
    text = body["text"]
    single = re.match(r"A2A Hub: normal held message from (\w+) arrived", text)
    if single:
        counts[f"{single[1]}:echo"] += 1
    for n, caller, target in re.findall(r"• (\d+) held messages? (\w+) → (\w+) arrived", text):
        counts[f"{caller}:{target}"] += int(n)
    return counts


def mail_counts(mail: Any) -> Counter[str]:
    counts: Counter[str] = Counter()
    single = re.match(r"A2A Hub: normal held message from (\w+) arrived", mail["Subject"])
    if single:
        counts[f"{single[1]}:echo"] += 1
    body = mail.get_payload(decode=True).decode()
    for n, caller, target in re.findall(
        r"^- (\d+) held messages? (\w+) -> (\w+) arrived", body, re.M
    ):
        counts[f"{caller}:{target}"] += int(n)
    return counts


def json_counts(body: dict[str, Any]) -> tuple[Counter[str], Counter[str]]:
    """Items per pair, and per folded text, in a signed JSON message."""
    pairs: Counter[str] = Counter()
    folds: Counter[str] = Counter()
    if body["event"] == "escalation.digest":
        for group in body["groups"]:
            pairs[f"{group['caller']}:{group['target']}"] += group["count"]
            for fold in group["folds"]:
                folds[fold["text"]] += fold["count"]
    else:
        pairs[f"{body['escalation']['agent']}:echo"] += 1
        folds[body["escalation"]["question"]] += 1
    return pairs, folds


async def test_a_thousand_holds_reach_each_target_as_a_handful_of_digests_that_add_up(
    hub, sdk, webhook, smtp, quick
):
    quick.HUB_NOTIFY_DIGEST_SECONDS = INTERVAL
    slack, signed = webhook(), webhook()
    await db(a2a, "notify", "add", "webhook", slack.url)
    await db(a2a, "notify", "add", "webhook", signed.url, "--format", "json")
    await db(a2a, "notify", "add", "email", "ops@example.com")
    alpha, beta = await two_pairs(hub, sdk)
    work = [(alpha, "drop the staging database")] * 850
    work += [(alpha, f"restart replica {i}") for i in range(50)]
    work += [(beta, "rotate the signing keys")] * 100

    started = time.monotonic()
    await hold_many(work)
    held = time.monotonic() - started
    assert await db(Escalation.objects.count) == 1000

    expected = Counter({"alpha:echo": 900, "beta:echo": 100})

    async def all_told() -> bool:
        told_slack = sum((slack_counts(json.loads(r.body)) for r in slack.accepted), Counter())
        told_mail = sum((mail_counts(m) for m in smtp.messages), Counter())
        told_json = sum((json_counts(r.event)[0] for r in signed.accepted), Counter())
        return told_slack == told_mail == told_json == expected

    await eventually(all_told, within=INTERVAL * 3 + 30)
    elapsed = time.monotonic() - started
    # One message at once, then at most one per interval.
    most = 1 + math.ceil(elapsed / INTERVAL)
    print(
        f"1000 holds in {held:.1f}s; messages: slack {len(slack.accepted)}, "
        f"email {len(smtp.messages)}, json {len(signed.accepted)}"
    )
    for receiver in (slack.accepted, smtp.messages, signed.accepted):
        assert 2 <= len(receiver) <= most
    # Identical items folded, with their counts.
    folds = sum((json_counts(r.event)[1] for r in signed.accepted), Counter())
    assert folds["drop the staging database"] == 850
    assert folds["rotate the signing keys"] == 100
    digest = next(r for r in slack.accepted if "digest" in json.loads(r.body)["text"])
    assert re.search(r"\d+ x `drop the staging database`", json.loads(digest.body)["text"])

    # A digest's link opens the inbox filtered to its pair and kind.
    group = next(
        g
        for r in signed.accepted
        if r.event["event"] == "escalation.digest"
        for g in r.event["groups"]
        if g["caller"] == "beta" and g["count"] > 1
    )
    assert group["link"] == f"{hub.url}/escalations/?pair=beta%3Aecho&kind=approval"
    page = await db(open_link, group["link"], hub.url)
    assert '<span class="badge pending" id="pending-total">100</span>' in page
    assert "rotate the signing keys" in page and "drop the staging database" not in page
    mails = "".join(m.get_payload(decode=True).decode() for m in smtp.messages)
    assert group["link"] in mails
    posts = "".join(json.loads(r.body)["text"] for r in slack.accepted)
    assert group["link"].replace("&", "&amp;") in posts


async def test_pending_digest_items_are_kept_in_the_database_until_sent(hub, sdk, webhook, quick):
    """What waits for a digest is a row, not memory: it goes after a restart too."""
    quick.HUB_NOTIFY_DIGEST_SECONDS = 3600
    receiver = webhook()
    await db(a2a, "notify", "add", "webhook", receiver.url, "--format", "json")
    alpha, _ = await two_pairs(hub, sdk)
    await hold(alpha, "first")

    async def first() -> list[Any]:
        return receiver.accepted

    await eventually(first)
    await hold_many([(alpha, "second")] * 5)
    waiting = await db(
        lambda: list(Notification.objects.filter(state="pending").values_list("event", flat=True))
    )
    assert waiting == ["arrived"] * 5 and len(receiver.accepted) == 1
    # The interval shortened: the stored items go, as one digest.
    target = await db(NotificationTarget.objects.get)
    await db(a2a, "notify", "set", str(target.pk), "--digest", "0")

    async def digest() -> Any:
        return receiver.accepted[1:]

    [second] = await eventually(digest)
    assert second.event["count"] == 5
    assert second.event["groups"][0]["folds"] == [{"count": 5, "text": "second"}]


async def test_a_routing_rule_sends_one_pair_to_one_target_only(hub, sdk, webhook, quick):
    for_alpha, for_beta, for_all = webhook(), webhook(), webhook()
    out = await db(a2a, "notify", "add", "webhook", for_alpha.url, "--pair", "alpha:echo")
    assert "told: digest: the hub's interval, about pairs alpha:echo" in out
    await db(a2a, "notify", "add", "webhook", for_beta.url, "--pair", "beta:echo")
    await db(a2a, "notify", "add", "webhook", for_all.url, "--format", "json")
    alpha, beta = await two_pairs(hub, sdk)
    await hold(alpha, "from alpha")
    await hold(beta, "from beta")

    async def everyone_told() -> bool:
        to_all = sum((json_counts(r.event)[0] for r in for_all.accepted), Counter())
        return sum(to_all.values()) == 2 and bool(for_alpha.accepted and for_beta.accepted)

    await eventually(everyone_told)
    assert [slack_counts(json.loads(r.body)) for r in for_alpha.accepted] == [
        Counter({"alpha:echo": 1})
    ]
    assert [slack_counts(json.loads(r.body)) for r in for_beta.accepted] == [
        Counter({"beta:echo": 1})
    ]
    told = await db(lambda: Counter(Notification.objects.values_list("target_id", flat=True)))
    assert sorted(told.values()) == [1, 1, 2]  # one each, both to the target without rules


async def test_an_item_nobody_answers_is_passed_on_to_the_next_target(hub, sdk, webhook, quick):
    first, second = webhook(), webhook()
    await db(a2a, "notify", "add", "webhook", second.url, "--kind", "input_required")
    later = await db(NotificationTarget.objects.get)
    out = await db(
        a2a,
        "notify",
        "add",
        "webhook",
        first.url,
        "--pass-to",
        str(later.pk),
        "--pass-after",
        "0.02",
    )
    assert f"unanswered after 1s: passed to {later.pk}" in out
    alpha, _ = await two_pairs(hub, sdk)
    waiting = await hold(alpha, "nobody answers this one")
    answered = await hold(alpha, "this one is approved at once")
    await db(escalation_approve, escalation_id=answered.pk, actor_label="olga")

    async def passed() -> list[Any]:
        return second.accepted

    [post] = await eventually(passed)
    text = json.loads(post.body)["text"]
    assert text.startswith("A2A Hub: normal held message from alpha is still unanswered")
    assert "nobody answers this one" in text
    assert f"/escalations/{waiting.pk}/" in text
    told_first = sum((slack_counts(json.loads(r.body)) for r in first.accepted), Counter())
    assert told_first == Counter({"alpha:echo": 2})
    rows = await db(
        lambda: list(
            Notification.objects.filter(target=later).values_list("escalation_id", "event")
        )
    )
    assert rows == [(waiting.pk, "passed")]


@pytest.mark.django_db
def test_a_digest_keeps_agent_text_escaped_for_slack(settings):
    """Slack's `&`, `<` and `>` escaped and the words in code spans, in a digest too: no
    mention, no link but the hub's."""
    settings.HUB_DASHBOARD_URL = "https://hub.example"
    target = NotificationTarget.objects.create(
        kind="webhook", address="https://hooks.example/x", format="slack"
    )
    for _ in range(3):
        notify_queue(escalation=held_escalation(ABUSIVE), event="arrived")
    lone = held_escalation("<!here> also", caller="beta")
    notify_queue(escalation=lone, event="arrived")
    [batch] = notify_claim()
    assert batch.target == target and len(batch.notes) == 4
    body, _ = _webhook_request(target, _about_batch(batch))
    text = json.loads(body)["text"]
    assert list(json.loads(body)) == ["text"]
    assert (
        "<!" not in text and "<@" not in text and "<#" not in text and "<https://evil" not in text
    )
    assert re.findall(r"<([^>|]*)\|", text) == [
        "https://hub.example/escalations/?pair=alpha%3Aecho&amp;kind=approval",
        f"https://hub.example/escalations/{lone.pk}/",
        "https://hub.example/escalations/",
    ]
    assert "3 x `Approve &lt;!channel&gt; &lt;!here&gt;" in text
    assert "1 x `&lt;!here&gt; also`" in text


@pytest.mark.django_db
def test_notify_set_changes_one_rule_at_a_time_and_everything_drops_them():
    user_create(username="dana", password="a-long-test-password-2026", role="operator")
    a2a("notify", "add", "email", "ops@example.com")
    target = NotificationTarget.objects.get()
    out = a2a("notify", "set", str(target.pk), "--pair", "a:b", "--pair", "c:d", "--user", "dana")
    assert out.strip() == (
        f"target {target.pk}: digest: the hub's interval, about pairs a:b, c:d, links act as dana"
    )
    out = a2a("notify", "set", str(target.pk), "--priority", "urgent", "--digest", "300")
    assert "digest every 300s, about pairs a:b, c:d; priorities urgent" in out
    out = a2a("notify", "set", str(target.pk), "--everything")
    assert "about everything" in out
    with pytest.raises(CommandError) as error:
        a2a("notify", "set", str(target.pk), "--kind", "gossip", "--pass-to", str(target.pk))
    assert str(error.value).startswith("invalid routing rule; kinds: 'gossip' is not one of")
    with pytest.raises(CommandError, match="bad pass-on; pass_to: a target cannot pass to itself"):
        a2a("notify", "set", str(target.pk), "--pass-to", str(target.pk))
