"""The tamper-evident record, end to end: calls through the hub with the official SDK client
and real agents, humans deciding on held messages, policy edits and agent changes; then
`a2a audit verify` passes, and every direct SQL change of an audited table (or of the record
itself) makes it fail and name the entry."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from django.core.management.base import CommandError
from django.db import connection

from a2a_core.asyncdb import db
from a2a_core.ledger import proofs
from a2a_core.models import (
    Agent,
    AuditEvent,
    Escalation,
    LedgerCheckpoint,
    LedgerEntry,
    LedgerHead,
    Message,
    PolicyVersion,
)
from a2a_core.services.agents import agent_resume, agent_suspend
from a2a_core.services.escalations import escalation_approve, escalation_reject
from a2a_core.services.policy import policy_publish
from a2a_core.signing_keys import jwks
from tests.a2a_core.cli.helpers import a2a, run_cli
from tests.a2a_core.protocol.helpers import request, send

pytestmark = pytest.mark.live


async def publish(document: dict[str, Any], reason: str) -> PolicyVersion:
    return await db(policy_publish, document=document, reason=reason, actor_label="test")


@pytest.fixture
async def busy(hub, sdk) -> dict[str, Any]:
    """Calls delivered, refused, held then approved and held then rejected; two policy
    versions; an agent suspended and resumed; a checkpoint signed."""
    await publish(
        {
            "matrix": [
                {"caller": "alpha", "target": "echo", "action": "approve"},
                {"caller": "mallory", "target": "echo", "action": "deny"},
            ]
        },
        "alpha's calls need approval; mallory may not call echo",
    )
    await hub.endpoint_agent("echo")
    _, alpha = await hub.caller("alpha")
    bravo_agent, bravo = await hub.caller("bravo")
    _, mallory = await hub.caller("mallory")
    idle, _ = await hub.caller("idle")
    for i in range(6):
        await send(await sdk("echo", bravo), request(f"echo bravo {i}"))
    with pytest.raises(Exception, match=r"not allowed|denied|matrix"):
        await send(await sdk("echo", mallory), request("echo mallory"))
    alpha_client = await sdk("echo", alpha)
    approved = await send(alpha_client, request("echo approve me"))
    rejected = await send(alpha_client, request("echo reject me"))
    first = await db(lambda: Escalation.objects.get(task_id=approved.id))
    second = await db(lambda: Escalation.objects.get(task_id=rejected.id))
    await db(escalation_approve, escalation_id=first.pk, actor_label="operator")
    await db(escalation_reject, escalation_id=second.pk, reason="no", actor_label="operator")
    await publish({"limits": {"perMinute": 600}}, "a rate limit")
    await db(agent_suspend, agent=bravo_agent, reason="test", actor_label="operator")
    await db(agent_resume, agent=bravo_agent, actor_label="operator")
    await db(a2a, "audit", "checkpoint")
    return {"idle": idle, "held": first.message_id, "rejected_held": second.message_id}


async def verify_fails(*names: str) -> str:
    with pytest.raises(CommandError) as failed:
        await db(a2a, "audit", "verify", "--quiet")
    assert failed.value.returncode == 1
    text = str(failed.value)
    assert text.startswith("tampered: ")
    for name in names:
        assert name in text
    return text


def sql(statement: str, params: list[Any] | None = None) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params or [])


async def run_sql(statement: str, params: list[Any] | None = None) -> None:
    await db(sql, statement, params)


def _copy_row(model: Any, pk: Any, **changes: Any) -> None:
    """INSERT a copy of a row with some columns changed, as an attacker with SQL would."""
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    selects = ", ".join(
        "%s" if f.column in changes else connection.ops.quote_name(f.column) for f in fields
    )
    params = [changes[f.column] for f in fields if f.column in changes]
    table = connection.ops.quote_name(model._meta.db_table)
    sql(
        f"INSERT INTO {table} ({columns}) SELECT {selects} FROM {table} WHERE id = %s",
        [*params, pk],
    )


async def test_verify_passes_on_a_busy_database(busy):
    out = await db(a2a, "audit", "verify", "--quiet")
    assert out.startswith("intact: ")
    kinds = await db(lambda: set(LedgerEntry.objects.values_list("kind", flat=True)))
    assert kinds == {"decision", "human", "policy", "agent"}
    head = await db(lambda: LedgerHead.objects.get(pk=1))
    count = await db(LedgerEntry.objects.count)
    assert head.size == count
    # The held message's decision changed twice: held, then delivered by a human.
    held = await db(lambda: Message.objects.get(pk=busy["held"]))
    bodies = await db(
        lambda: [
            json.loads(b)["state"]
            for b in LedgerEntry.objects.filter(object_type="message", object_id=str(held.pk))
            .order_by("leaf_index")
            .values_list("body", flat=True)
        ]
    )
    assert [(s["decision"], s["reason"]) for s in bodies] == [
        ("hold", "approval_required"),
        ("deliver", "approved_by_human"),
    ]


# --- direct SQL on each audited table --------------------------------------------------------


async def test_an_update_of_a_decision_is_named(busy):
    row = await db(lambda: Message.objects.get(pk=busy["rejected_held"]))
    await run_sql("UPDATE a2a_core_message SET decision = 'deliver' WHERE id = %s", [row.pk])
    text = await verify_fails(f"message:{row.pk}", "decision", "updated outside the hub")
    assert "(decision " in text


async def test_a_deleted_message_is_named(busy):
    refused = await db(lambda: Message.objects.get(sender__slug="mallory"))
    await run_sql("DELETE FROM a2a_core_message WHERE id = %s", [refused.pk])
    await verify_fails(f"message:{refused.pk}", "deleted outside the hub")


async def test_an_inserted_message_is_named(busy):
    refused = await db(lambda: Message.objects.get(sender__slug="mallory"))
    await db(_copy_row, Message, refused.pk, message_id="forged")
    forged = await db(lambda: Message.objects.get(message_id="forged"))
    await verify_fails(f"message:{forged.pk}", "inserted outside the hub")


async def test_an_update_of_an_audit_event_is_named(busy):
    event = await db(lambda: AuditEvent.objects.get(action="escalation.approve"))
    await run_sql(
        "UPDATE a2a_core_auditevent SET actor_label = 'someone' WHERE id = %s", [event.pk]
    )
    await verify_fails(f"audit:{event.pk}", "actor", "updated outside the hub")


async def test_a_deleted_audit_event_is_named(busy):
    event = await db(lambda: AuditEvent.objects.get(action="escalation.reject"))
    await run_sql("DELETE FROM a2a_core_auditevent WHERE id = %s", [event.pk])
    await verify_fails(f"audit:{event.pk}", "deleted outside the hub")


async def test_an_inserted_audit_event_is_named(busy):
    event = await db(lambda: AuditEvent.objects.get(action="escalation.reject"))
    await db(_copy_row, AuditEvent, event.pk, summary="never happened")
    forged = await db(lambda: AuditEvent.objects.get(summary="never happened"))
    await verify_fails(f"audit:{forged.pk}", "inserted outside the hub")


async def test_an_update_of_a_policy_version_is_named(busy):
    version = await db(lambda: PolicyVersion.objects.order_by("number").last())
    await run_sql("UPDATE a2a_core_policyversion SET reason = 'other' WHERE id = %s", [version.pk])
    await verify_fails(f"policy:{version.pk}", "reason", "updated outside the hub")


async def test_a_deleted_policy_version_is_named(busy):
    version = await db(
        lambda: PolicyVersion.objects.filter(is_active=False).order_by("number").last()
    )
    await run_sql("DELETE FROM a2a_core_policyversion WHERE id = %s", [version.pk])
    await verify_fails(f"policy:{version.pk}", "deleted outside the hub")


async def test_an_inserted_policy_version_is_named(busy):
    version = await db(
        lambda: PolicyVersion.objects.filter(is_active=False).order_by("number").last()
    )
    await db(_copy_row, PolicyVersion, version.pk, number=999)
    forged = await db(lambda: PolicyVersion.objects.get(number=999))
    await verify_fails(f"policy:{forged.pk}", "inserted outside the hub")


async def test_an_update_of_an_agent_is_named(busy):
    agent = busy["idle"]
    await run_sql(
        "UPDATE a2a_core_agent SET endpoint_url = 'https://evil.example' WHERE id = %s", [agent.pk]
    )
    await verify_fails(f"agent:{agent.pk}", "url", "updated outside the hub")


async def test_a_deleted_agent_is_named(busy):
    agent = busy["idle"]
    for table in ("a2a_core_skilltag", "a2a_core_skill", "a2a_core_agentcardversion"):
        await run_sql(f"DELETE FROM {table} WHERE agent_id = %s", [agent.pk])
    # What the database would do for the hub (ON DELETE SET NULL), outside the record.
    await run_sql("UPDATE a2a_core_auditevent SET agent_id = NULL WHERE agent_id = %s", [agent.pk])
    await run_sql("DELETE FROM a2a_core_agent WHERE id = %s", [agent.pk])
    await verify_fails(f"agent:{agent.pk}", "deleted outside the hub")


async def test_an_inserted_agent_is_named(busy):
    agent = busy["idle"]
    await db(_copy_row, Agent, agent.pk, slug="forged", token_hash=None)
    forged = await db(lambda: Agent.objects.get(slug="forged"))
    await verify_fails(f"agent:{forged.pk}", "inserted outside the hub")


async def test_a_removal_through_the_hub_is_no_tamper(busy):
    from a2a_core.services.agents import agent_delete

    await db(agent_delete, agent=busy["idle"], actor_label="operator")
    out = await db(a2a, "audit", "verify", "--quiet")
    assert out.startswith("intact: ")


# --- the record itself -----------------------------------------------------------------------


async def test_an_edited_entry_is_named(busy):
    entry = await db(
        lambda: LedgerEntry.objects.filter(kind="policy").order_by("leaf_index").first()
    )
    await run_sql(
        "UPDATE a2a_core_ledgerentry SET body = REPLACE(body, 'approval', 'approva1') WHERE id = %s",
        [entry.pk],
    )
    await verify_fails(f"entry {entry.leaf_index} (policy policy:", "changed")


async def test_a_deleted_entry_is_named(busy):
    entry = await db(lambda: LedgerEntry.objects.order_by("leaf_index")[3])
    await run_sql("DELETE FROM a2a_core_ledgerentry WHERE id = %s", [entry.pk])
    await verify_fails("entry 3", "deleted")


async def test_an_appended_entry_for_nothing_is_named(busy):
    def forge() -> int:
        head = LedgerHead.objects.get(pk=1)
        body = proofs.canonical(
            {"kind": "agent", "type": "agent", "id": "9999", "at": "x", "state": {"slug": "ghost"}}
        )
        leaf = proofs.leaf_of(body)
        chain = proofs.chain_of(bytes.fromhex(head.chain_hash), leaf)
        LedgerEntry.objects.create(
            kind="agent",
            object_type="agent",
            object_id="9999",
            body=body,
            leaf_index=head.size,
            leaf_hash=leaf.hex(),
            chain_hash=chain.hex(),
        )
        return head.size

    index = await db(forge)
    await verify_fails(f"entry {index} (agent agent:9999)", "deleted outside the hub")


async def test_rewritten_hashes_are_caught_by_the_checkpoint_signature(busy):
    def rewrite() -> None:
        entries = list(LedgerEntry.objects.order_by("leaf_index"))
        chain = proofs.GENESIS
        for i, entry in enumerate(entries):
            if i == 2:
                entry.body = entry.body.replace('"at":"', '"at":"1')
            leaf = proofs.leaf_of(entry.body)
            chain = proofs.chain_of(chain, leaf)
            entry.leaf_hash, entry.chain_hash = leaf.hex(), chain.hex()
            entry.save(update_fields=["body", "leaf_hash", "chain_hash"])

    await db(rewrite)
    # The first checkpoint that covers the changed entry is the one that no longer holds.
    size = await db(
        lambda: LedgerCheckpoint.objects.filter(size__gt=2).order_by("size").first().size
    )
    await verify_fails(f"checkpoint of size {size}", "hashes rewritten")


# --- offline: the export and receipts ---------------------------------------------------------

NO_DATABASE = {"DATABASE_URL": "sqlite:////nonexistent/dir/none.sqlite3", "REDIS_URL": ""}


async def test_an_export_verifies_offline_with_the_jwks_alone(busy, tmp_path: Path):
    export, keys = tmp_path / "ledger.jsonl", tmp_path / "jwks.json"
    await db(a2a, "audit", "export", "--ledger", str(export))
    keys.write_text(json.dumps(jwks()))
    ok = run_cli("audit", "verify", "--export", str(export), "--jwks", str(keys), env=NO_DATABASE)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("intact: ")

    lines = export.read_text().splitlines()
    entry_line = next(i for i, line in enumerate(lines) if '"type": "entry"' in line)
    lines[entry_line + 1] = lines[entry_line + 1].replace('\\"kind\\"', '\\"kinD\\"', 1)
    export.write_text("\n".join(lines) + "\n")
    bad = run_cli("audit", "verify", "--export", str(export), "--jwks", str(keys), env=NO_DATABASE)
    assert bad.returncode == 1
    assert "tampered: entry 1" in bad.stderr

    other = tmp_path / "other.json"
    other.write_text(json.dumps({"keys": []}))
    unknown = run_cli(
        "audit", "verify", "--export", str(export), "--jwks", str(other), env=NO_DATABASE
    )
    assert unknown.returncode == 1
    assert "the JWKS has no key" in unknown.stderr


async def test_a_receipt_verifies_and_one_with_a_flipped_byte_does_not(busy, tmp_path: Path):
    held = await db(lambda: Message.objects.get(pk=busy["held"]))
    token = (await db(a2a, "audit", "receipt", str(held.pk))).strip()
    keys, receipt = tmp_path / "jwks.json", tmp_path / "receipt.jws"
    keys.write_text(json.dumps(jwks()))
    receipt.write_text(token)
    ok = run_cli("audit", "verify-receipt", str(receipt), "--jwks", str(keys), env=NO_DATABASE)
    assert ok.returncode == 0, ok.stderr
    assert f"(decision message:{held.pk})" in ok.stdout

    middle = len(token) // 2
    flipped = token[:middle] + ("A" if token[middle] != "A" else "B") + token[middle + 1 :]
    receipt.write_text(flipped)
    bad = run_cli("audit", "verify-receipt", str(receipt), "--jwks", str(keys), env=NO_DATABASE)
    assert bad.returncode == 1
    assert "invalid receipt" in bad.stderr


# --- rows from before the record -------------------------------------------------------------


async def test_rows_from_before_the_record_are_taken_in_by_a_baseline(busy, hub, sdk, settings):
    # An upgraded database: rows written while the record was off have no entry.
    settings.HUB_LEDGER = False
    _, old = await hub.caller("old")
    await send(await sdk("echo", old), request("echo from before"))
    settings.HUB_LEDGER = True
    before = await db(lambda: Message.objects.get(sender__slug="old"))

    text = await verify_fails(f"message:{before.pk}", "a2a audit baseline")
    assert "has no entry" in text

    said = await db(a2a, "audit", "baseline")
    # The agent, its message, and the audit event of its registration.
    assert said.startswith("took 3 rows into the record as they are now (marked baseline")
    out = await db(a2a, "audit", "verify", "--quiet")
    assert out.startswith("intact: ")
    wanted = {("message", str(before.pk)), ("agent", str(before.sender_id))}
    bodies = await db(
        lambda: [json.loads(b) for b in LedgerEntry.objects.values_list("body", flat=True)]
    )
    assert sorted(
        (b["type"], b.get("baseline")) for b in bodies if (b["type"], b["id"]) in wanted
    ) == [
        ("agent", True),
        ("message", True),
    ]
    # The baseline is in the record too: who took it, and when.
    assert await db(lambda: AuditEvent.objects.filter(action="ledger.baseline").count()) == 1
    assert (await db(a2a, "audit", "baseline")).startswith("every governed row has its entry")
    # From here on, a change to such a row is a tamper like any other.
    await run_sql("UPDATE a2a_core_message SET decision = 'reject' WHERE id = %s", [before.pk])
    await verify_fails(f"message:{before.pk}", "updated outside the hub")
