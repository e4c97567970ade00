"""The policy editor's parts: its sections, inputs, rows and grid cells, and the editor's
wording of pydantic's problems. `dashboard.policy_draft` puts them together."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from a2a_core.schemas.policy import ANY

# A cell's own rules in the order clicks go through them, starting from the opposite of what
# the cell inherits and skipping what it inherits; then back to no rule of its own.
OWN_ACTIONS = ("allow", "deny", "approve")
OPPOSITE = {"allow": "deny", "deny": "allow", "approve": "deny"}
LIMITS = (
    ("perMinute", "Messages per minute"),
    ("perHour", "Messages per hour"),
    ("concurrent", "Tasks in flight"),
    ("incomingPerMinute", "Incoming per minute"),
    ("incomingConcurrent", "Incoming calls at once"),
    ("inboxQueue", "Inbox queue"),
    ("questionDeadlineSeconds", "Question deadline (s)"),
)
# What a blank input means, where it is not "no limit".
BLANKS = {
    "questionDeadlineSeconds": "hub default",
    "deadlineSeconds": "as for questions",
}
LABELS = dict(LIMITS)
ACTION_LABELS = (("allow", "allow"), ("deny", "deny"), ("approve", "needs approval"))
PRIORITIES = ("low", "normal", "high", "urgent")
UNAVAILABLE = ("suspended", "circuit_open", "offline")
MAX_ROWS = 1000
SLUG = re.compile(r"^[a-z0-9][a-z0-9_-]*$")


@dataclass(frozen=True)
class Section:
    """Rows of one kind: inputs are named `<name>-<row>-<field>`; `multi` fields are
    checkbox groups."""

    name: str
    fields: tuple[str, ...]
    multi: tuple[str, ...] = ()
    # The fields whose being filled in makes a row more than a blank one.
    content: tuple[str, ...] = ()


RULES = Section(
    "rule",
    ("caller", "target", "action", "kinds", "skills", "via"),
    content=("caller", "target", "kinds", "skills", "via"),
)
OVERRIDES = Section(
    "override", ("agent", *(name for name, _ in LIMITS)), content=("agent", *(n for n, _ in LIMITS))
)
APPROVALS = Section(
    "approval",
    (
        "name",
        "kinds",
        "skills",
        "priorities",
        "callers",
        "targets",
        "deadlineSeconds",
        "timeoutOutcome",
    ),
    multi=("priorities",),
    content=("name", "kinds", "skills", "priorities", "callers", "targets"),
)
REDIRECTS = Section(
    "redirect", ("targets", "when", "to"), multi=("when",), content=("targets", "when", "to")
)
CONTENT = Section(
    "content",
    (
        "name",
        "detect",
        "pattern",
        "direction",
        "action",
        "reason",
        "callers",
        "targets",
        "kinds",
        "skills",
        "examples",
    ),
    content=("name", "pattern", "reason", "callers", "targets", "kinds", "skills", "examples"),
)
DETECTORS = (
    ("secrets", "a secret (API keys, tokens, private keys, passwords)"),
    ("card", "a card number (Luhn checksum)"),
    ("iban", "an IBAN (check digits)"),
    ("email", "an email address"),
    ("phone", "a phone number (international form)"),
    ("pattern", "a pattern (RE2)"),
)
DIRECTIONS = (("request", "requests"), ("answer", "answers"), ("both", "both"))
CONTENT_ACTIONS = (("redact", "redact"), ("hold", "hold for a human"), ("reject", "reject"))
SECTIONS = {s.name: s for s in (RULES, OVERRIDES, APPROVALS, REDIRECTS, CONTENT)}


@dataclass
class Input:
    """One input: its name in the form, what it holds, and what is wrong with it."""

    name: str
    value: str = ""
    # For a checkbox group: the boxes ticked.
    chosen: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    label: str = ""

    @property
    def blank(self) -> str:
        """What leaving it blank means (its placeholder)."""
        return BLANKS.get(self.name.rsplit("-", 1)[-1].rsplit(".", 1)[-1], "no limit")


@dataclass
class Row:
    """One row of a section; the template reads its inputs as `row.caller`, `row.kinds`..."""

    key: str
    inputs: dict[str, Input]
    errors: list[str] = field(default_factory=list)

    def __getitem__(self, name: str) -> Input:
        return self.inputs[name]

    @property
    def limits(self) -> list[Input]:
        """An override row's limit inputs, in the order of the global ones."""
        return [self.inputs[name] for name, _ in LIMITS if name in self.inputs]

    def filled(self, section: Section) -> bool:
        return any(self.inputs[f].value.strip() or self.inputs[f].chosen for f in section.content)


@dataclass(frozen=True)
class Cell:
    """A grid cell: the action for the pair, and whether it is the pair's own rule."""

    caller: str
    target: str
    action: str
    own: bool
    why: str
    # Rules with kinds or skills for this very pair (listed below the grid).
    narrower: int = 0

    @property
    def self_pair(self) -> bool:
        return self.caller == self.target and self.caller != ANY

    @property
    def pair(self) -> str:
        return f"{self.caller} {self.target}"


def words(value: str) -> list[str]:
    return [word for word in re.split(r"[,\s]+", value) if word]


def as_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, list):
        return ", ".join(str(v) for v in value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def prefixed(where: str, message: str) -> str:
    return f"{where}: {message}" if where else message


def nullable_number(value: str) -> str | None:
    """A nullable number: blank is None ("no limit", or see BLANKS); anything else goes to the
    schema as typed."""
    value = value.strip()
    return value or None


# pydantic's wording -> the editor's
PLAINER = (
    (re.compile(r"^Input should be greater than or equal to (\S+)$"), r"at least \1"),
    (re.compile(r"^Input should be less than or equal to (\S+)$"), r"at most \1"),
    (re.compile(r"^Input should be greater than (\S+)$"), r"more than \1"),
    (re.compile(r"^Input should be a valid integer.*"), "a whole number"),
    (re.compile(r"^Input should be a valid number.*"), "a number"),
    (
        re.compile(r"^String should match pattern.*"),
        "an agent id: a-z, 0-9, - and _ (or * for any)",
    ),
)


def friendly(message: str, *, blank: bool) -> str:
    message = message.removeprefix("Value error, ")
    if blank and any(w in message for w in ("valid integer", "valid number", "at least 1 char")):
        return "required"
    for pattern, plainer in PLAINER:
        message = pattern.sub(plainer, message)
    return message
