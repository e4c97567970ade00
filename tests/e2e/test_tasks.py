"""The tasks screens in a real browser: the board, a task's chain, a conversation; live."""

from __future__ import annotations

import pytest
from a2a.types.a2a_pb2 import Part
from google.protobuf import struct_pb2
from playwright.async_api import expect

from a2a_core.asyncdb import db
from a2a_core.models import Task
from tests.a2a_core.protocol.helpers import request, send, stored_task
from tests.e2e.conftest import live, shot

pytestmark = pytest.mark.live


def data_part(**fields: object) -> Part:
    value = struct_pb2.Value()
    value.struct_value.update(fields)
    return Part(data=value)


async def test_the_board_leads_to_a_task_whose_chain_leads_to_its_child(hub, sdk, dashboard):
    await hub.endpoint_agent("planner")
    await hub.endpoint_agent("researcher")
    await hub.endpoint_agent("booking-agent-with-a-rather-long-name")
    _, token = await hub.caller("orchestrator")
    planner = await sdk("planner", token)
    answer = await send(
        planner,
        request("delegate researcher delegate booking-agent-with-a-rather-long-name echo 2 nights"),
    )
    root = await stored_task(answer.id)
    child = await db(lambda: root.children.get())
    # A conversation of several turns: a question, its answer, a follow-up in the same context.
    asked = await send(planner, request("ask Which city, and for how many nights?"))
    await send(
        planner,
        request(
            "",
            task_id=asked.id,
            context_id=asked.context_id,
            parts=[Part(text="Lyon, two nights."), data_part(city="Lyon", nights=2)],
        ),
    )
    await send(planner, request("echo thanks <b>planner</b>", context_id=asked.context_id))
    await send(planner, request("fail the printer is out of ink"))
    await send(planner, request("ask Which airport?"))

    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/tasks/")
    await live(page)
    card = page.locator(f'.board-column[data-state="completed"] [data-task="{root.pk}"]')
    assert "orchestrator" in await card.inner_text() and "planner" in await card.inner_text()
    assert "delegate researcher" in await card.inner_text()
    await page.locator('.board-column[data-state="failed"] .task-card', has_text="ink").wait_for()
    await page.locator('.board-column[data-state="input-required"] .task-card').first.wait_for()
    await shot(page, "tasks-board")

    await card.click()
    await page.wait_for_url(f"**/tasks/{root.pk}/")
    assert await page.locator("svg.chain a.node").count() == 3
    await page.locator(f'svg.chain a.node[data-task="{child.pk}"]').click()

    await page.wait_for_url(f"**/tasks/{child.pk}/")
    assert await page.locator("svg.chain a.current").get_attribute("data-task") == child.pk
    assert "planner" in await page.locator("h1").inner_text()
    assert "researcher" in await page.locator("h1").inner_text()
    await page.locator(".artifact", has_text="said").wait_for()
    await shot(page, "task-page")

    await page.goto(f"{hub.url}/tasks/{asked.id}/")
    await page.locator("a", has_text=asked.context_id).click()
    await page.wait_for_url(f"**/contexts/{asked.context_id}/")
    chat = page.locator("ol.chat .msg")
    assert await chat.count() == 4
    texts = [await m.inner_text() for m in await chat.all()]
    assert "Which city" in texts[0] and "Which city" in texts[1] and "Lyon, two nights." in texts[2]
    assert '"nights": 2' in texts[2]
    assert "<b>planner</b>" in texts[3]  # agent text shown as text
    await shot(page, "conversation")


async def test_a_childs_progress_redraws_the_chain_on_its_roots_page(hub, sdk, dashboard):
    _, _, planner_token = await hub.endpoint_agent("planner")
    await hub.endpoint_agent("researcher")
    _, token = await hub.caller("orchestrator")
    answer = await send(await sdk("planner", token), request("delegate researcher ask Where to?"))
    child = await db(lambda: Task.objects.get(parent_id=answer.id).pk)
    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/tasks/{answer.id}/")
    await live(page)
    node = page.locator(f'svg.chain a.node[data-task="{child}"]')
    assert await node.get_attribute("data-state") == "input-required"

    # The planner answers its child task's question; the root's page redraws the chain.
    await send(
        await sdk("researcher", planner_token),
        request("Lisbon", task_id=child, message_id="answer-1"),
    )

    await page.locator(f'svg.chain a.node.completed[data-task="{child}"]').wait_for()


async def test_a_new_task_appears_on_the_board_without_a_reload(hub, sdk, dashboard):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    page = await dashboard("operator")
    await page.goto(f"{hub.url}/tasks/")
    await live(page)
    assert await page.locator(".task-card").count() == 0

    await send(await sdk("echo", token), request("echo hello board"))

    card = page.locator('.board-column[data-state="completed"] .task-card', has_text="hello")
    await card.wait_for()
    assert "alpha" in await card.inner_text()


def thirty_task_chain() -> str:
    """A root fanning out to five lines of delegations (six, six, six, six and five long):
    thirty tasks, some agents with long names. Returns a task deep in it."""
    from tests.factories import make_task, register

    names = ["orchestrator", "router", "travel-desk-coordinator-for-europe", "a", "b", "c"]
    agents = {name: register(name).agent for name in names}
    root = make_task(caller=agents["orchestrator"], target=agents["router"], state="working")
    states = ["completed", "working", "failed", "input-required", "canceled"]
    deep = root
    for branch, length in enumerate([6, 6, 6, 6, 5]):
        parent = root
        for level in range(1, length + 1):
            parent = make_task(
                caller=parent.target,
                target=agents[names[2 + (branch + level) % 4]],
                state=states[(branch + level) % 5],
                parent=parent,
                root=root,
                depth=level,
                skill="book-a-very-specific-thing" if level == 3 else "",
            )
            if (branch, level) == (2, 4):
                deep = parent
    return deep.pk


async def test_a_thirty_task_chain_stays_readable_in_dark_mode(hub, dashboard):
    deep = await db(thirty_task_chain)
    page = await dashboard("viewer", color_scheme="dark")
    await page.goto(f"{hub.url}/tasks/{deep}/")

    nodes = page.locator("svg.chain a.node rect")
    assert await nodes.count() == 30
    boxes = [await nodes.nth(i).bounding_box() for i in range(30)]
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert a and b
            apart = (
                a["x"] + a["width"] <= b["x"]
                or b["x"] + b["width"] <= a["x"]
                or a["y"] + a["height"] <= b["y"]
                or b["y"] + b["height"] <= a["y"]
            )
            assert apart, (a, b)
    current = page.locator("svg.chain a.current")
    assert await current.get_attribute("data-task") == deep
    # Wider than the page: the chain scrolls to show the current task whole.
    await expect(current.locator("rect")).to_be_in_viewport(ratio=1)
    await shot(page, "task-chain-dark")


async def test_outcome_colours_on_the_board_mean_what_they_say(hub, sdk, dashboard):
    await hub.endpoint_agent("echo")
    _, token = await hub.caller("alpha")
    client = await sdk("echo", token)
    done = await send(client, request("echo fine"))
    broken = await send(client, request("fail disk full"))
    await db(lambda: Task.objects.filter(pk=done.id).update(reason="all tests pass"))

    page = await dashboard("viewer")
    await page.goto(f"{hub.url}/tasks/")
    colour = "el => getComputedStyle(el).color"
    ok = await page.locator(f"[data-task='{done.id}'] .card-reason").evaluate(colour)
    bad = await page.locator(f"[data-task='{broken.id}'] .card-reason").evaluate(colour)
    green, red = await page.evaluate(
        "() => { const s = getComputedStyle(document.body);"
        " return [s.getPropertyValue('--ok'), s.getPropertyValue('--bad')]; }"
    )
    assert (ok, bad) == (hex_rgb(green), hex_rgb(red))


def hex_rgb(value: str) -> str:
    value = value.strip().lstrip("#")
    r, g, b = (int(value[i : i + 2], 16) for i in (0, 2, 4))
    return f"rgb({r}, {g}, {b})"
