"""Who plays in the demo: the agents' cards, the demo policy and the words of the scenarios.

Plain data, importable without Django (the agents' processes only speak A2A to the hub).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The card version every demo agent registers with. An endpoint agent that could not get its
# usual port carries the port in the version's build metadata: a changed card needs a new
# version, and the same port later finds its earlier version again.
CARD_VERSION = "1.0.0-demo"

# Who publishes the demo policy (PolicyVersion.author_label): a policy someone else published
# is theirs, and the demo leaves it alone.
DEMO_ACTOR = "demo"


@dataclass(frozen=True)
class SkillSpec:
    id: str
    name: str
    description: str
    tags: tuple[str, ...]
    examples: tuple[str, ...] = ()


@dataclass(frozen=True)
class Member:
    slug: str
    name: str
    role: str
    description: str
    endpoint: bool
    skills: tuple[SkillSpec, ...] = field(default_factory=tuple)


CAST: tuple[Member, ...] = (
    Member(
        "pm",
        "Product manager",
        "product",
        "Turns feature requests into specs; asks the architect for a design review first.",
        True,
        (
            SkillSpec(
                "feature-spec",
                "Feature spec",
                "Writes the spec of a feature: scope, acceptance criteria, risks.",
                ("product", "planning", "spec"),
                ("Spec the saved searches feature",),
            ),
        ),
    ),
    Member(
        "architect",
        "Architect",
        "engineering",
        "Reviews designs, asks the tester for a test strategy, signs off risky changes.",
        True,
        (
            SkillSpec(
                "architecture-review",
                "Architecture review",
                "Reviews a feature's design: data model, APIs, failure modes.",
                ("architecture", "design", "review"),
            ),
            SkillSpec(
                "sign-off",
                "Sign-off",
                "Signs off changes a reviewer escalated (migrations, security).",
                ("architecture", "approval"),
            ),
        ),
    ),
    Member(
        "tester",
        "Tester",
        "engineering",
        "Writes test strategies and test plans for features under design.",
        True,
        (
            SkillSpec(
                "test-strategy",
                "Test strategy",
                "Lists the cases a feature needs: unit, integration, end to end.",
                ("qa", "testing"),
            ),
        ),
    ),
    Member(
        "implementer",
        "Implementer",
        "engineering",
        "Implements features on a branch and gets them reviewed until approved.",
        True,
        (
            SkillSpec(
                "implementation",
                "Implementation",
                "Implements a feature from its spec, with tests.",
                ("code", "python", "implementation"),
            ),
        ),
    ),
    Member(
        "ledger",
        "Ledger",
        "finance",
        "Answers questions about customers' plans, seats and invoices (sometimes slowly).",
        True,
        (
            SkillSpec(
                "billing-lookup",
                "Billing lookup",
                "The plan, seats and balance of a customer account.",
                ("billing", "data"),
                ("What plan is acme-corp on?",),
            ),
        ),
    ),
    Member(
        "flaky",
        "Invoice sync",
        "finance",
        "Syncs invoices to the accounting system; its database falls over now and then.",
        True,
        (
            SkillSpec(
                "invoice-sync",
                "Invoice sync",
                "Pushes a batch of invoices to the accounting system.",
                ("billing", "sync"),
            ),
        ),
    ),
    Member(
        "ping",
        "Calendar ping",
        "operations",
        "Keeps the deploy calendar; checks every change with pong.",
        True,
        (
            SkillSpec(
                "calendar-sync",
                "Calendar sync",
                "Syncs the deploy calendar of a week with pong.",
                ("calendar", "deploys"),
            ),
        ),
    ),
    Member(
        "pong",
        "Calendar pong",
        "operations",
        "Keeps the on-call calendar; checks every change with ping.",
        True,
        (
            SkillSpec(
                "slot-check",
                "Slot check",
                "Confirms deploy slots against the on-call rota.",
                ("calendar", "on-call"),
            ),
        ),
    ),
    Member(
        "reviewer",
        "Reviewer",
        "engineering",
        "Reviews branches: asks for changes, approves, escalates migrations to a human.",
        False,
        (
            SkillSpec(
                "code-review",
                "Code review",
                "Reviews a set of files and returns a verdict with concerns.",
                ("review", "qa"),
            ),
        ),
    ),
    Member(
        "scribe",
        "Scribe",
        "docs",
        "Writes up what the team learned and shares it with whoever it concerns.",
        False,
        (
            SkillSpec(
                "write-up",
                "Write-up",
                "Turns a discovery into a knowledge share and a broadcast.",
                ("docs", "knowledge"),
            ),
        ),
    ),
    Member(
        "ops",
        "Ops",
        "operations",
        "Runs production changes; asks a human before anything risky.",
        False,
        (
            SkillSpec(
                "production-change",
                "Production change",
                "Rotates credentials, scales pools, purges caches.",
                ("ops", "production"),
            ),
        ),
    ),
    Member(
        "monitor",
        "Monitor",
        "operations",
        "Watches dashboards and pages ops; chatty when things go wrong.",
        False,
        (
            SkillSpec(
                "alerting",
                "Alerting",
                "Sends alerts about disks, latency and error rates.",
                ("monitoring", "alerts"),
            ),
        ),
    ),
    Member(
        "director",
        "Director",
        "orchestrator",
        "Hands out the work: specs, implementations, write-ups, production changes.",
        False,
        (
            SkillSpec(
                "orchestration",
                "Orchestration",
                "Starts pieces of work and follows them to the end.",
                ("orchestration",),
            ),
        ),
    ),
)

ENDPOINTS = tuple(m for m in CAST if m.endpoint)
INBOXES = tuple(m for m in CAST if not m.endpoint)
BY_SLUG = {m.slug: m for m in CAST}


def card(member: Member, url: str | None = None, port: int | None = None) -> dict[str, Any]:
    """The member's A2A 1.0 card (ProtoJSON). An endpoint agent's interfaces point at `url`;
    `port`, when it is not the agent's usual one, goes into the version."""
    data: dict[str, Any] = {
        "name": member.name,
        "description": member.description,
        "version": CARD_VERSION if port is None else f"{CARD_VERSION}+port.{port}",
        "capabilities": {"streaming": True},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": [
            {
                "id": s.id,
                "name": s.name,
                "description": s.description,
                "tags": list(s.tags),
                **({"examples": list(s.examples)} if s.examples else {}),
            }
            for s in member.skills
        ],
    }
    if member.endpoint and url:
        data["supportedInterfaces"] = [
            {"url": f"{url}/", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": f"{url}/rest", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"},
        ]
    return data


# --- the demo policy ---------------------------------------------------------------------------

# Monitor's alert bursts run into its own per-minute limit; flaky's breaker opens after three
# failures in a row and lets a trial call through 20 s later; monitor may not query the ledger.
BURST_LIMIT = 10
BREAKER_COOLDOWN = 20

DEMO_POLICY: dict[str, Any] = {
    "defaultAction": "allow",
    "matrix": [{"caller": "monitor", "target": "ledger", "action": "deny"}],
    "agentLimits": {"monitor": {"perMinute": BURST_LIMIT}},
    "maxHops": 5,
    "loopDetection": True,
    "breaker": {"enabled": True, "failureThreshold": 3, "cooldownSeconds": BREAKER_COOLDOWN},
    # Unanswered, a held escalation is rejected after 15 minutes: some always wait, none for ever.
    "approvals": [
        {"name": "escalations need a human", "kinds": ["escalation"], "deadlineSeconds": 900}
    ],
}


# --- the words ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Feature:
    title: str
    area: str
    files: tuple[str, ...]
    criteria: tuple[str, ...]


FEATURES: tuple[Feature, ...] = (
    Feature(
        "Saved searches",
        "search",
        ("search/saved.py", "search/api.py", "tests/search/test_saved.py"),
        ("a user keeps up to 20 saved searches", "a shared search is read-only for others"),
    ),
    Feature(
        "Two-factor login",
        "auth",
        ("auth/totp.py", "auth/views.py", "templates/auth/otp.html"),
        ("TOTP codes from any authenticator app", "ten single-use recovery codes"),
    ),
    Feature(
        "CSV export of invoices",
        "billing",
        ("billing/export.py", "billing/views.py", "tests/billing/test_export.py"),
        ("exports stream, whatever the size", "amounts in the account's currency"),
    ),
    Feature(
        "Webhook retries with backoff",
        "webhooks",
        ("webhooks/delivery.py", "webhooks/models.py", "tests/webhooks/test_retry.py"),
        ("retries after 1, 2, 4... minutes", "gives up after 24 hours and says so"),
    ),
    Feature(
        "Team invitations",
        "accounts",
        ("accounts/invites.py", "accounts/emails.py", "templates/accounts/invite.html"),
        ("an invitation expires after 7 days", "an admin can revoke it"),
    ),
    Feature(
        "Audit log filters",
        "audit",
        ("audit/filters.py", "audit/views.py", "tests/audit/test_filters.py"),
        ("filter by actor, action and date range", "filters survive a page reload"),
    ),
    Feature(
        "Dark mode",
        "ui",
        ("static/css/theme.css", "ui/preferences.py", "templates/base.html"),
        ("follows the system setting by default", "contrast ratio of 4.5:1 at least"),
    ),
    Feature(
        "Password reset by email",
        "auth",
        ("auth/reset.py", "auth/tokens.py", "tests/auth/test_reset.py"),
        ("the link works once, for one hour", "no hint whether the address exists"),
    ),
)

CONCERNS: tuple[tuple[str, str], ...] = (
    ("must_fix", "missing null check on the request's correlation id"),
    ("should_fix", "no test for the empty list case"),
    ("should_fix", "N+1 query when listing the rows; use select_related"),
    ("suggestion", "name the constant instead of the magic 86400"),
    ("must_fix", "the error path swallows the exception; log it and re-raise"),
    ("should_fix", "the timeout is hard-coded; read it from settings"),
    ("suggestion", "this helper duplicates utils/dates.py"),
)

MIGRATIONS: tuple[tuple[str, str], ...] = (
    ("billing/migrations/0042_drop_legacy_plan.py", "drops the legacy_plan column for good"),
    ("accounts/migrations/0031_backfill_org_ids.py", "backfills 4.2M rows under a table lock"),
    ("search/migrations/0017_rebuild_index.py", "rebuilds the search index (about 40 min)"),
)

DISCOVERIES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    (
        "Flaky pagination test",
        "tests/search/test_saved.py::test_pagination fails one run in 20 when the clock "
        "crosses a second; freeze time in that test.",
        ("tester", "implementer", "reviewer"),
    ),
    (
        "Postgres 16 upgrade",
        "Staging runs Postgres 16 since Monday: the planner now picks the partial index on "
        "invoices; the export query went from 2.1 s to 140 ms.",
        ("architect", "implementer"),
    ),
    (
        "Payments API rate limits",
        "The payment provider now allows 25 requests per second per key; batch refunds "
        "must be spread or they get 429s.",
        ("architect", "implementer", "tester"),
    ),
    (
        "Feature flags cleanup",
        "Nine feature flags have been on for everyone for over 90 days; their branches can go.",
        ("implementer", "reviewer"),
    ),
)

BROADCASTS: tuple[tuple[str, str, str, str], ...] = (
    (
        "role:engineering",
        "Code freeze",
        "Release branch is cut at 17:00; fixes only after.",
        "attention_needed",
    ),
    (
        "role:engineering",
        "Staging is back",
        "Staging was down 20 min (disk full); all green now.",
        "fyi",
    ),
    ("all", "Incident review", "Thursday 10:00: the webhook outage of last week.", "fyi"),
    (
        "role:engineering",
        "Dependency alert",
        "Upgrade cryptography to 43.0.1 today.",
        "action_required",
    ),
)

CUSTOMERS: tuple[tuple[str, str], ...] = (
    ("What plan is acme-corp on?", "Team plan, 23 seats, renews on the 1st of next month."),
    ("Outstanding balance of globex?", "EUR 1,240.00, overdue by 12 days."),
    ("How many seats does initech use?", "41 of 50 seats; 3 invitations pending."),
    ("When did umbrella last pay?", "Invoice INV-20931 paid 4 days ago by card."),
    ("Is hooli on annual billing?", "Yes, annual, next invoice in 7 months."),
)

PRODUCTION_CHANGES: tuple[tuple[str, str], ...] = (
    (
        "Rotate the production database credentials",
        "Rotating the credentials restarts the API pods (about 30 s of errors). "
        "Go ahead now, or wait for the 22:00 window?",
    ),
    (
        "Scale the import workers to 12",
        "Twelve workers double today's compute bill (about USD 180). Approve?",
    ),
    (
        "Purge the CDN cache for app.example.com",
        "A full purge sends every request to the origin for a few minutes. Go ahead?",
    ),
    (
        "Fail over the primary database to db-2",
        "Fail-over means about 10 s of read-only mode. Now, or at 03:00?",
    ),
)

ALERTS: tuple[str, ...] = (
    "disk usage on db-2 at 91%",
    "p99 latency of /api/search at 1.8 s",
    "5xx rate at 2.3% on api-3",
    "queue depth of imports at 12,400",
    "certificate of status.example.com expires in 6 days",
    "memory of worker-7 at 94%",
)

DENIED_ASKS: tuple[str, ...] = (
    "Export the customer list with balances",
    "Which accounts are overdue?",
)
