"""The policy editor: everyone with a role may look, only admins change the policy; every save
is a version with a reason and a diff; invalid input is shown inline and nothing is saved."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any

import pytest
from django.test import Client

from a2a_core.models import Message, PolicyVersion
from a2a_core.services.policy import policy_publish
from tests.factories import register

pytestmark = pytest.mark.django_db


class FormFields(HTMLParser):
    """What a browser would submit for the form with id `form_id` (no button pressed)."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: list[tuple[str, str]] = []
        self._select: str | None = None
        self._options: list[tuple[str, bool]] = []
        self._textarea: str | None = None
        self._text = ""

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.inside = a.get("id") == self.form_id
        if not self.inside:
            return
        if tag == "input" and "name" in a:
            kind = a.get("type", "text")
            if kind in ("checkbox", "radio") and "checked" not in a:
                return
            if kind not in ("button", "submit"):
                self.fields.append((a["name"], a.get("value", "on" if kind == "checkbox" else "")))
        elif tag == "select":
            self._select, self._options = a.get("name"), []
        elif tag == "textarea":
            self._textarea, self._text = a.get("name"), ""
        elif tag == "option" and self._select is not None:
            self._options.append((a.get("value", ""), "selected" in a))

    def handle_data(self, data: str) -> None:
        if self._textarea is not None:
            self._text += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "textarea" and self._textarea is not None:
            self.fields.append((self._textarea, self._text))
            self._textarea = None
        elif tag == "select" and self._select is not None:
            chosen = [v for v, selected in self._options if selected] or [self._options[0][0]]
            self.fields.append((self._select, chosen[0]))
            self._select = None


def form_of(html: str, form_id: str = "policy-form") -> dict[str, Any]:
    parser = FormFields(form_id)
    parser.feed(html)
    data: dict[str, Any] = {}
    for name, value in parser.fields:
        data.setdefault(name, []).append(value)
    return data


def editor(client: Client) -> tuple[dict[str, Any], str]:
    """The admin's editor form as rendered, and the CSRF token to post it with."""
    page = client.get("/policy/").content.decode()
    return form_of(page), client.cookies["csrftoken"].value


def post(client: Client, url: str, data: dict[str, Any], token: str) -> str:
    response = client.post(url, data, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
    assert response.status_code == 200, response.content.decode()[:500]
    return response.content.decode()


def publish(document: dict[str, Any], reason: str = "baseline") -> PolicyVersion:
    return policy_publish(document=document, reason=reason, actor_label="test")


# --- who may do what ----------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_viewers_and_operators_see_the_policy_read_only(as_role, role):
    register("alpha")
    publish({"matrix": [{"caller": "alpha", "target": "*", "action": "deny"}]})
    page = as_role(role).get("/policy/").content.decode()
    assert '<fieldset class="policy-editor" disabled>' in page
    assert "Save as a new version" not in page
    assert "Roll back" not in page
    assert "Changing the policy needs the admin role; you are " + role in page
    assert 'aria-label="alpha → *: deny"' in page


@pytest.mark.parametrize("role", ["viewer", "operator"])
def test_viewers_and_operators_cannot_post_any_policy_form(as_role, role):
    register("alpha")
    publish({"defaultAction": "allow"})
    client = as_role(role)
    client.get("/policy/")
    token = client.cookies["csrftoken"].value
    form = {"defaultAction": "deny", "reason": "sneaky", "last": "10"}
    for url in (
        "/policy/save/",
        "/policy/draft/",
        "/policy/dry-run/",
        "/policy/versions/1/rollback/",
    ):
        response = client.post(url, form, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
        assert response.status_code == 403, url
    assert list(PolicyVersion.objects.values_list("number", flat=True)) == [1]


def test_a_post_without_the_csrf_token_saves_nothing(as_role):
    response = as_role("admin").post("/policy/save/", {"reason": "x", "defaultAction": "deny"})
    assert response.status_code == 403
    assert not PolicyVersion.objects.exists()


# --- the grid -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("default", "clicks"),
    [
        ("allow", ["alpha echo deny", "alpha echo approve", None, "alpha echo deny"]),
        ("deny", ["alpha echo allow", "alpha echo approve", None, "alpha echo allow"]),
    ],
)
def test_a_click_turns_an_inherited_cell_into_its_opposite_then_cycles_back(
    as_role, default, clicks
):
    register("alpha"), register("echo")
    publish({"defaultAction": default})
    admin = as_role("admin")
    form, token = editor(admin)
    seen = []
    for _ in range(4):
        html = post(admin, "/policy/draft/", {**form, "cycle": "alpha echo"}, token)
        form = form_of(f'<form id="policy-form">{html}</form>')
        seen.append(next((c for c in form.get("cell", []) if c.startswith("alpha echo")), None))
        if len(seen) == 3:
            assert f"alpha → echo: {default}, the default for pairs without a rule" in html
    assert seen == clicks


def test_the_grid_shows_inherited_actions_dimmed_and_own_rules_plain(as_role):
    register("alpha"), register("beta"), register("echo")
    publish(
        {
            "defaultAction": "deny",
            "matrix": [
                {"caller": "alpha", "target": "*", "action": "allow"},
                {"caller": "alpha", "target": "echo", "action": "approve"},
            ],
        }
    )
    page = as_role("viewer").get("/policy/").content.decode()
    assert 'class="cell approve" name="cycle" value="alpha echo"' in page
    assert 'class="cell allow inherited" name="cycle" value="alpha beta"' in page
    assert 'aria-label="alpha → beta: allow, inherited from alpha → *"' in page
    assert 'aria-label="beta → echo: deny, the default for pairs without a rule"' in page
    # An agent never routes to itself: no cell to click.
    assert 'value="alpha alpha"' not in page


def test_agent_names_with_markup_are_escaped_in_the_grid(as_role):
    register("<img src=x onerror=alert(1)>", slug="evil")
    page = as_role("admin").get("/policy/").content.decode()
    assert "<img src=x" not in page
    assert 'title="evil (&lt;img src=x onerror=alert(1)&gt;)"' in page


# --- saving ---------------------------------------------------------------------------------------


def test_an_admin_denies_a_pair_and_saves_a_version_with_its_diff(as_role):
    register("alpha"), register("echo")
    publish({})
    admin = as_role("admin")
    form, token = editor(admin)
    form["cell"] = ["alpha echo deny"]
    form["reason"] = ["alpha floods echo"]

    response = admin.post("/policy/save/", form, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")

    assert response.status_code == 200 and response["HX-Redirect"] == "/policy/"
    version = PolicyVersion.objects.get(is_active=True)
    assert (version.number, version.reason, version.author.username) == (
        2,
        "alpha floods echo",
        "admin",
    )
    assert version.document["matrix"] == [
        {"caller": "alpha", "target": "echo", "action": "deny", "kinds": [], "skills": []}
    ]
    assert version.diff == [
        {"op": "changed", "path": "matrix", "old": [], "new": version.document["matrix"]}
    ]
    page = admin.get("/policy/").content.decode()
    assert "Policy v2 is active (1 change)." in page
    assert "alpha floods echo" in page
    assert "<li>alpha → echo: deny (new rule)</li>" in page  # the diff, in words


def test_the_rendered_form_saved_unchanged_is_the_same_policy(as_role):
    register("alpha"), register("beta")
    publish(
        {
            "routingEnabled": True,
            "defaultAction": "deny",
            "matrix": [
                {"caller": "*", "target": "beta", "action": "deny", "kinds": ["broadcast"]},
                {"caller": "alpha", "target": "*", "action": "allow"},
            ],
            "limits": {
                "perMinute": 30,
                "perHour": None,
                "incomingPerMinute": 7,
                "questionDeadlineSeconds": 120,
            },
            "agentLimits": {"beta": {"perMinute": 3, "questionDeadlineSeconds": 30}},
            "maxHops": 3,
            "loopDetection": False,
            "breaker": {"enabled": False, "failureThreshold": 2, "cooldownSeconds": 7.5},
            "approvals": [
                {"name": "urgent", "priorities": ["high", "urgent"], "deadlineSeconds": 60},
                {"name": "as long as questions", "callers": ["alpha"]},
            ],
            "redirects": [{"targets": ["beta"], "when": ["offline"], "to": "alpha"}],
        }
    )
    admin = as_role("admin")
    form, token = editor(admin)
    form["reason"] = ["nothing, really"]
    html = post(admin, "/policy/save/", form, token)
    assert "this is the active policy (v1) already; nothing to publish" in html
    assert PolicyVersion.objects.count() == 1


def test_an_admin_sets_the_question_deadline_and_clears_it_back_to_the_hubs_default(as_role):
    publish({})
    admin = as_role("admin")
    form, token = editor(admin)
    assert form["limits.questionDeadlineSeconds"] == [""]
    assert 'name="limits.questionDeadlineSeconds" value="" placeholder="hub default"' in (
        admin.get("/policy/").content.decode()
    )
    form["limits.questionDeadlineSeconds"] = ["300"]
    form["reason"] = ["questions go stale in five minutes"]
    post(admin, "/policy/save/", form, token)
    assert (
        PolicyVersion.objects.get(is_active=True).document["limits"]["questionDeadlineSeconds"]
        == 300
    )
    page = admin.get("/policy/").content.decode()
    assert "<li>limits: question deadline (s): the hub&#x27;s default → 300</li>" in page

    form, token = editor(admin)
    assert form["limits.questionDeadlineSeconds"] == ["300"]
    form["limits.questionDeadlineSeconds"] = [""]
    form["reason"] = ["back to the default"]
    post(admin, "/policy/save/", form, token)
    active = PolicyVersion.objects.get(is_active=True)
    assert (active.number, active.document["limits"]["questionDeadlineSeconds"]) == (3, None)


def test_a_redirect_rule_naming_several_agents_round_trips_through_the_editor(as_role):
    for slug in ("reviewer", "reviewer-2", "reviewer-3"):
        register(slug)
    publish({"redirects": [{"targets": ["reviewer"], "to": ["reviewer-2", "reviewer-3"]}]})
    admin = as_role("admin")
    form, token = editor(admin)
    assert form["redirect-0-to"] == ["reviewer-2, reviewer-3"]
    form["reason"] = ["nothing, really"]
    html = post(admin, "/policy/save/", form, token)
    assert "this is the active policy (v1) already; nothing to publish" in html

    form["redirect-0-to"] = ["reviewer-3 reviewer-2"]
    form["reason"] = ["reviewer-3 first"]
    post(admin, "/policy/save/", form, token)
    assert PolicyVersion.objects.latest("number").document["redirects"] == [
        {
            "targets": ["reviewer"],
            "when": ["suspended", "circuit_open"],
            "to": ["reviewer-3", "reviewer-2"],
        }
    ]

    form, token = editor(admin)
    form["redirect-0-to"] = ["reviewer-2 nobody"]
    form["reason"] = ["a typo"]
    html = post(admin, "/policy/save/", form, token)
    assert "no agent named &#x27;nobody&#x27; is registered" in html
    assert PolicyVersion.objects.count() == 2


def test_an_admin_grants_a_delegation_through_an_agent_in_a_rule_row(as_role):
    for slug in ("alpha", "beta", "gamma"):
        register(slug)
    publish({"matrix": [{"caller": "alpha", "target": "gamma", "action": "deny"}]})
    admin = as_role("admin")
    form, token = editor(admin)
    form.update(
        {
            "rule-0-caller": ["alpha"],
            "rule-0-target": ["gamma"],
            "rule-0-action": ["allow"],
            "rule-0-kinds": [""],
            "rule-0-skills": [""],
            "rule-0-via": ["beta"],
            "reason": ["alpha may reach gamma through beta"],
        }
    )
    post(admin, "/policy/save/", form, token)

    assert PolicyVersion.objects.latest("number").document["matrix"] == [
        {
            "caller": "alpha",
            "target": "gamma",
            "action": "allow",
            "kinds": [],
            "skills": [],
            "via": ["beta"],
        },
        {"caller": "alpha", "target": "gamma", "action": "deny", "kinds": [], "skills": []},
    ]
    page = admin.get("/policy/").content.decode()
    assert form_of(page)["rule-0-via"] == ["beta"]
    assert 'aria-label="alpha → gamma: deny"' in page  # the direct pair stays denied
    versions = admin.get("/policy/").content.decode()
    assert "alpha → gamma via beta: allow (new rule)" in versions

    form, token = editor(admin)
    form["rule-0-via"] = ["beta nobody"]
    form["reason"] = ["a typo"]
    html = post(admin, "/policy/save/", form, token)
    fragment = html.split('name="rule-0-via"', 1)[1].split("</td>", 1)[0]
    assert "no agent named &#x27;nobody&#x27; is registered" in fragment
    assert PolicyVersion.objects.count() == 2


def test_invalid_input_is_shown_next_to_its_field_and_nothing_is_saved(as_role):
    register("alpha"), register("echo")
    publish({})
    admin = as_role("admin")
    form, token = editor(admin)
    form.update(
        {
            "reason": [""],
            "limits.perMinute": ["0"],
            "maxHops": [""],
            "rule-0-caller": ["alpah"],
            "rule-0-target": ["echo"],
            "rule-0-action": ["deny"],
            "rule-0-kinds": ["gossip"],
            "rule-0-skills": [""],
        }
    )

    html = post(admin, "/policy/save/", form, token)

    assert "5 problems, shown next to the fields; nothing was saved." in html
    assert PolicyVersion.objects.count() == 1
    fragment = html.split('name="limits.perMinute"', 1)[1].split("</label>", 1)[0]
    assert "at least 1" in fragment
    fragment = html.split('name="maxHops"', 1)[1].split("</label>", 1)[0]
    assert "required" in fragment
    fragment = html.split('name="rule-0-caller"', 1)[1].split("</td>", 1)[0]
    assert "no agent named &#x27;alpah&#x27; is registered" in fragment
    assert "unknown kind(s) [&#x27;gossip&#x27;]" in html
    fragment = html.split('name="reason"', 1)[1].split("</label>", 1)[0]
    assert "say why the policy changes" in fragment
    # What was typed stays in the form.
    assert 'value="alpah"' in html


def test_saving_over_a_version_published_meanwhile_asks_to_save_again(as_role):
    publish({})
    admin = as_role("admin")
    form, token = editor(admin)
    publish({"maxHops": 9}, "someone else's change")
    form.update({"maxHops": ["3"], "reason": ["shorter chains"]})

    html = post(admin, "/policy/save/", form, token)
    assert "v2 was published by test after this editor was opened" in html
    assert PolicyVersion.objects.count() == 2

    form = {**form_of(html), "reason": ["shorter chains"]}
    response = admin.post("/policy/save/", form, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
    assert response["HX-Redirect"] == "/policy/"
    assert PolicyVersion.objects.get(is_active=True).document["maxHops"] == 3


def test_stopping_all_routing_needs_the_confirmation_box(as_role):
    publish({})
    admin = as_role("admin")
    form, token = editor(admin)
    form.update({"routingEnabled": ["off"], "reason": ["incident"]})

    html = post(admin, "/policy/save/", form, token)
    assert "tick the box to confirm" in html
    assert PolicyVersion.objects.count() == 1

    form["confirmStop"] = ["1"]
    response = admin.post("/policy/save/", form, HTTP_X_CSRFTOKEN=token, HTTP_HX_REQUEST="true")
    assert response["HX-Redirect"] == "/policy/"
    assert PolicyVersion.objects.get(is_active=True).document["routingEnabled"] is False
    assert "Routing is stopped." in admin.get("/policy/").content.decode()


def test_rows_are_added_and_removed_without_saving(as_role):
    register("alpha")
    admin = as_role("admin")
    form, token = editor(admin)
    html = post(admin, "/policy/draft/", {**form, "add_row": "override"}, token)
    form = form_of(html)
    assert form["override-0-perMinute"] == ["600"]  # starts from the global limits
    form["override-0-agent"] = ["alpha"]
    form = form_of(post(admin, "/policy/draft/", {**form, "add_row": "rule"}, token))
    assert "rule-0-caller" in form and "override-0-agent" in form
    form = form_of(post(admin, "/policy/draft/", {**form, "remove_row": "override-0"}, token))
    assert "override-0-agent" not in form and "rule-0-caller" in form
    assert not PolicyVersion.objects.exists()


# --- history and rollback -------------------------------------------------------------------------


def test_rollback_needs_a_reason_then_restores_the_version(as_role):
    publish({"defaultAction": "deny"}, "lock down")
    publish({"defaultAction": "allow"}, "open up")
    admin = as_role("admin")
    page = admin.get("/policy/").content.decode()
    assert 'id="rollback-1"' in page and 'id="rollback-2"' not in page  # v2 is active
    token = admin.cookies["csrftoken"].value

    html = post(admin, "/policy/versions/1/rollback/", {"reason": " "}, token)
    assert "say why the policy changes" in html
    assert PolicyVersion.objects.count() == 2

    response = admin.post(
        "/policy/versions/1/rollback/",
        {"reason": "the storm is back"},
        HTTP_X_CSRFTOKEN=token,
        HTTP_HX_REQUEST="true",
    )
    assert response["HX-Redirect"] == "/policy/"
    active = PolicyVersion.objects.get(is_active=True)
    assert (active.number, active.reason) == (3, "rollback to v1: the storm is back")
    assert active.document["defaultAction"] == "deny"
    assert "Rolled back to v1: policy v3 is active." in admin.get("/policy/").content.decode()


def test_a_version_page_shows_its_document_and_diff(as_role):
    publish({}, "first")
    publish({"maxHops": 3}, "shorter chains <b>now</b>")
    page = as_role("viewer").get("/policy/versions/2/").content.decode()
    assert "Policy v2" in page
    assert "shorter chains &lt;b&gt;now&lt;/b&gt;" in page
    assert "<li>longest delegation chain (hops): 5 → 3</li>" in page
    assert "&quot;maxHops&quot;: 3" in page
    assert as_role("viewer").get("/policy/versions/9/").status_code == 404


def test_an_old_version_opens_in_the_editor_as_a_draft(as_role):
    publish({"maxHops": 2}, "tight")
    publish({"maxHops": 9}, "loose")
    admin = as_role("admin")
    page = admin.get("/policy/?from=1").content.decode()
    assert "This draft starts from v1" in page
    assert form_of(page)["maxHops"] == ["2"]


# --- dry-run --------------------------------------------------------------------------------------


def test_a_dry_run_reports_what_the_draft_would_change_without_saving(as_role):
    alpha, echo = register("alpha").agent, register("echo").agent
    for i in range(3):
        Message.objects.create(
            message_id=f"m{i}",
            role="user",
            kind="request",
            sender=alpha,
            target=echo,
            decision="deliver",
            decision_reason="ok",
        )
    admin = as_role("admin")
    form, token = editor(admin)
    form["cell"] = ["alpha echo deny"]
    form["last"] = ["100"]

    html = post(admin, "/policy/dry-run/", form, token)

    assert "Replayed the last 3 messages through the active policy and through this draft: " in html
    assert '<strong class="dry-run-changed">3</strong> would be decided differently.' in html
    assert '<span class="badge deliver">deliver</span><span class="arrow">→</span>' in html
    assert '<td class="kind">denied_by_matrix</td><td class="right mono">3</td>' in html
    first = Message.objects.order_by("pk").first()
    assert first is not None and f'href="/messages/{first.pk}/"' in html
    assert not PolicyVersion.objects.exists()
    # The draft stays as it was, ready to save.
    assert form_of(html)["cell"] == ["alpha echo deny"]


def test_a_dry_run_of_an_invalid_draft_shows_the_problems(as_role):
    admin = as_role("admin")
    form, token = editor(admin)
    form["breaker.failureThreshold"] = ["lots"]
    html = post(admin, "/policy/dry-run/", form, token)
    fragment = html.split('name="breaker.failureThreshold"', 1)[1].split("</label>", 1)[0]
    assert "a whole number" in fragment
    assert "Dry-run of this draft" not in html


def test_the_editor_counts_unsaved_changes_in_words(as_role):
    register("director"), register("ledger")
    publish({"matrix": [{"caller": "director", "target": "ledger", "action": "allow"}]})
    admin = as_role("admin")
    form, token = editor(admin)
    assert "No unsaved changes" in admin.get("/policy/").content.decode()

    html = post(admin, "/policy/draft/", {**form, "cycle": "director ledger"}, token)

    assert "Unsaved: 1 change" in html
    assert "<li>director → ledger: allow → deny</li>" in html


# --- content rules ----------------------------------------------------------------------------

CARDS = {
    "name": "cards",
    "detect": "card",
    "action": "redact",
    "examples": ["5555 5555 5555 4444", "4012888888881881"],
}
TICKETS = {
    "name": "tickets",
    "detect": "pattern",
    "pattern": "TICKET-[0-9]{4}",
    "direction": "both",
    "action": "reject",
    "reason": "ticket ids stay inside",
    "callers": ["alpha"],
}


def test_content_rules_and_their_examples_survive_an_edit_in_the_editor(as_role):
    register("alpha")
    publish({"contentRules": [CARDS, TICKETS]})
    admin = as_role("admin")
    form, token = editor(admin)
    assert form["content-0-examples"] == ["5555 5555 5555 4444\n4012888888881881"]
    form.update({"content-1-action": ["redact"], "reason": ["tickets are fine, masked"]})

    post(admin, "/policy/save/", form, token)

    saved = PolicyVersion.objects.get(is_active=True).document["contentRules"]
    assert saved[0] == {
        **CARDS,
        "pattern": None,
        "direction": "request",
        "callers": [],
        "targets": [],
        "kinds": [],
        "skills": [],
        "reason": "",
    }
    assert (saved[1]["name"], saved[1]["action"], saved[1]["pattern"]) == (
        "tickets",
        "redact",
        "TICKET-[0-9]{4}",
    )
    assert saved[1]["reason"] == "ticket ids stay inside"


def test_content_rule_problems_are_shown_on_the_rule_and_nothing_is_saved(as_role):
    publish({})
    admin = as_role("admin")
    form, token = editor(admin)
    html = post(admin, "/policy/draft/", {**form, "add_row": "content"}, token)
    form = form_of(html)
    form.update(
        {
            "content-0-name": ["lookbehind"],
            "content-0-detect": ["pattern"],
            "content-0-pattern": ["(?<=id )[0-9]+"],
            "reason": ["try"],
        }
    )
    html = post(admin, "/policy/draft/", {**form, "add_row": "content"}, token)
    form = form_of(html)
    form.update(
        {
            "content-1-name": ["answers held"],
            "content-1-detect": ["email"],
            "content-1-direction": ["answer"],
            "content-1-action": ["hold"],
        }
    )
    html = post(admin, "/policy/draft/", {**form, "add_row": "content"}, token)
    form = form_of(html)
    form.update(
        {
            "content-2-name": ["cards"],
            "content-2-detect": ["card"],
            "content-2-examples": ["4111 1111 1111 1112"],
        }
    )

    html = post(admin, "/policy/save/", form, token)

    assert "3 problems, shown next to the fields; nothing was saved." in html
    assert "not a valid RE2 expression (invalid perl operator: (?&lt;=)" in html
    assert "an answer cannot be held" in html
    assert "example 0 (&#x27;4111 1111 1111 1112&#x27;) does not match this rule" in html
    assert PolicyVersion.objects.count() == 1


def test_a_dry_run_counts_each_content_rule(as_role):
    caller, target = register("alpha"), register("echo")
    for text in ("pay 4111 1111 1111 1111", "TICKET-1234 again", "nothing"):
        Message.objects.create(
            message_id=text,
            role="user",
            parts=[{"text": text}],
            kind="request",
            sender=caller.agent,
            target=target.agent,
        )
    publish({"contentRules": [CARDS, TICKETS]})
    admin = as_role("admin")
    form, token = editor(admin)

    html = post(admin, "/policy/dry-run/", form, token)

    table = html.split('id="dry-run-content"', 1)[1].split("</table>", 1)[0]
    rows = [
        [cell.split(">")[-1] for cell in row.split("</td>")[:-1]]
        for row in table.split("<tbody>")[1].split("</tr>")[:-1]
    ]
    assert rows == [["cards", "0", "1", "0"], ["tickets", "0", "0", "1"]]
