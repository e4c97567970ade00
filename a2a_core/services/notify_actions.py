"""Deciding where people are told: an email's Approve/Reject links and Slack's buttons.

Both end in the dashboard's own decision functions (`escalation_approve`,
`escalation_reject`), so a decision made here is recorded under the person's name exactly as
one made in the dashboard: on the escalation, the task, the message and the audit.

Email links are `django.core.signing` tokens (keyed by SECRET_KEY) naming the escalation, the
action, the hub user the email was sent for, and a random nonce. A link works for that user
only (after logging in), for HUB_NOTIFY_LINK_SECONDS, and once: using it spends its nonce (a
unique row in `NotifyKeyUse`), in the transaction that decides.

A Slack callback is verified as Slack documents: `X-Slack-Signature` is `v0=` and the
HMAC-SHA256, keyed by HUB_SLACK_SIGNING_SECRET, of `v0:<X-Slack-Request-Timestamp>:<body>`;
the timestamp must be within five minutes of now, and a signature is accepted once (a
replayed request is refused). The Slack user must be in HUB_SLACK_USERS, mapped to an active
hub user with the operator role.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import time
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import parse_qs

from django.conf import settings
from django.contrib.auth.models import User
from django.core import signing
from django.db import IntegrityError, transaction
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from a2a_core.errors import HubError, PermissionDenied
from a2a_core.models import Escalation, NotifyKeyUse
from a2a_core.services.escalations import escalation_approve, escalation_reject
from a2a_core.services.users import ROLES

SALT = "a2a-hub.notify.action-link"
ACTIONS = ("approve", "reject")
# Slack's own bound on a request's age.
SLACK_WINDOW_SECONDS = 300
# Slack's interaction payloads are small; anything far larger is not one.
SLACK_MAX_BODY = 64 * 1024


def _is_operator(user: User) -> bool:
    if user.is_superuser:
        return True
    names = set(user.groups.values_list("name", flat=True))
    return bool(names.intersection(ROLES[ROLES.index("operator") :]))


# Email links ------------------------------------------------------------------------------


class LinkRefused(HubError):
    """An email link that cannot be used: `status` is the HTTP status its page answers with
    (400 not a link of this hub, 403 another user's, 410 expired or used)."""

    code = "link_refused"

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class LinkAction:
    escalation_id: int
    action: str
    user_id: int
    nonce: str


def action_link_token(*, escalation_id: int, action: str, user_id: int) -> str:
    """A signed, single-use token for one action on one escalation by one user."""
    assert action in ACTIONS
    payload = {"e": escalation_id, "a": action, "u": user_id, "n": secrets.token_urlsafe(12)}
    return signing.dumps(payload, salt=SALT)


def action_link_read(token: str, *, user: User) -> LinkAction:
    """What a link's token asks, for `user`; raises LinkRefused (bad, another user's, expired
    or already used). Nothing is spent here: the confirm page only reads."""
    if len(token) > 500:
        raise LinkRefused("this is not a link the hub sent", status=400)
    try:
        data = signing.loads(token, salt=SALT, max_age=settings.HUB_NOTIFY_LINK_SECONDS)
    except signing.SignatureExpired:
        raise LinkRefused(
            "this link has expired: decide in the dashboard instead", status=410
        ) from None
    except signing.BadSignature:
        raise LinkRefused("this is not a link the hub sent", status=400) from None
    try:
        link = LinkAction(
            escalation_id=int(data["e"]),
            action=str(data["a"]),
            user_id=int(data["u"]),
            nonce=str(data["n"]),
        )
    except (KeyError, TypeError, ValueError):
        raise LinkRefused("this is not a link the hub sent", status=400) from None
    if link.action not in ACTIONS or not (
        0 < link.escalation_id < 2**63 and 0 < link.user_id < 2**63
    ):
        raise LinkRefused("this is not a link the hub sent", status=400)
    if link.user_id != user.pk:
        owner = User.objects.filter(pk=link.user_id).values_list("username", flat=True).first()
        raise LinkRefused(
            f"this link was sent to {owner or 'another user'}: log in as them to use it",
            status=403,
        )
    if NotifyKeyUse.objects.filter(key=_link_key(link)).exists():
        raise LinkRefused("this link was already used: each link works once", status=410)
    return link


def _link_key(link: LinkAction) -> str:
    return f"link:{link.nonce}"[:128]


def action_link_use(*, token: str, user: User, reason: str = "") -> Escalation:
    """Do what the link says, as `user` (who must be logged in and an operator), spending the
    link in the same transaction. Raises LinkRefused, PermissionDenied, or the decision's
    own errors (Conflict when someone decided first: the link stays unspent then)."""
    link = action_link_read(token, user=user)
    if not _is_operator(user):
        raise PermissionDenied(f"{user.get_username()} may not decide escalations")
    with transaction.atomic():
        try:
            with transaction.atomic():
                NotifyKeyUse.objects.create(key=_link_key(link))
        except IntegrityError:
            raise LinkRefused(
                "this link was already used: each link works once", status=410
            ) from None
        return _decide(link.escalation_id, link.action, user, reason or "rejected from email")


def _decide(escalation_id: int, action: str, user: User, reason: str) -> Escalation:
    if action == "approve":
        return escalation_approve(escalation_id=escalation_id, actor=user)
    return escalation_reject(escalation_id=escalation_id, reason=reason, actor=user)


# Slack ------------------------------------------------------------------------------------


class SlackRefused(HubError):
    """A Slack callback refused: `status` 400 (not an interaction), 401 (not from Slack:
    a bad or missing signature, a stale or replayed timestamp) or 403 (a Slack user the hub
    does not know)."""

    code = "slack_refused"

    def __init__(self, message: str, *, status: int) -> None:
        super().__init__(message)
        self.status = status


class _SlackUser(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: str = Field(min_length=1, max_length=64)
    username: str = Field(default="", max_length=200)


class _SlackAction(BaseModel):
    model_config = ConfigDict(extra="ignore")
    action_id: Literal["approve", "reject"]
    value: str = Field(pattern=r"^[0-9]{1,12}$")


class _SlackInteraction(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: Literal["block_actions"]
    user: _SlackUser
    actions: list[_SlackAction] = Field(min_length=1, max_length=1)


def slack_verify(*, body: bytes, timestamp: str, signature: str, now: float | None = None) -> None:
    """Raise SlackRefused(401) unless `body` is signed by Slack now (see the module's
    docstring); does not spend the signature."""
    secret = settings.HUB_SLACK_SIGNING_SECRET
    if not secret:
        raise SlackRefused("Slack actions are off: HUB_SLACK_SIGNING_SECRET is not set", status=401)
    if not timestamp.isdigit() or len(timestamp) > 12:
        raise SlackRefused("missing or malformed X-Slack-Request-Timestamp", status=401)
    now = time.time() if now is None else now
    if abs(now - int(timestamp)) > SLACK_WINDOW_SECONDS:
        raise SlackRefused("the request's timestamp is more than five minutes off", status=401)
    base = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
        raise SlackRefused("the request's signature does not match", status=401)


def slack_interaction(*, body: bytes, timestamp: str, signature: str) -> Escalation:
    """Verify a Slack interactivity callback and decide what its button says, as the mapped
    hub user. Raises SlackRefused (400, 401, 403), PermissionDenied, or the decision's own
    errors (Conflict when already decided, NotFound). A refused request changes nothing."""
    if len(body) > SLACK_MAX_BODY:
        raise SlackRefused("the request is too large to be a Slack interaction", status=400)
    slack_verify(body=body, timestamp=timestamp, signature=signature)
    interaction = _parse(body)
    username = settings.HUB_SLACK_USERS.get(interaction.user.id)
    user = User.objects.filter(username=username, is_active=True).first() if username else None
    if user is None:
        raise SlackRefused(
            f"Slack user {interaction.user.id} is not mapped to a hub user (HUB_SLACK_USERS)",
            status=403,
        )
    if not _is_operator(user):
        raise SlackRefused(f"{user.get_username()} may not decide escalations", status=403)
    action = interaction.actions[0]
    with transaction.atomic():
        try:
            with transaction.atomic():
                NotifyKeyUse.objects.create(key=f"slack:{signature}"[:128])
        except IntegrityError:
            raise SlackRefused("this request was already received (a replay)", status=401) from None
        return _decide(int(action.value), action.action_id, user, "rejected in Slack")


def _parse(body: bytes) -> _SlackInteraction:
    """The interaction in a form-encoded `payload` field, as Slack sends it."""
    try:
        form = parse_qs(body.decode("utf-8"), strict_parsing=True, max_num_fields=20)
        raw: Any = json.loads(form["payload"][0])
        return _SlackInteraction.model_validate(raw)
    except (ValueError, KeyError, RecursionError, ValidationError):
        raise SlackRefused(
            "not a Slack block_actions interaction with one approve or reject action", status=400
        ) from None
