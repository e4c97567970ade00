"""The policy editor's form: a policy document as the inputs an admin edits, and back again.

`parse_policy` stays the one judge of what a valid policy is. This module only turns the form
into a document and remembers which input each part of that document came from, so that every
problem `parse_policy` reports (paths like `limits.perMinute` or `matrix.3.action`) is shown
next to the input that caused it. On top it checks what only a form can get wrong: a rule
naming an agent that does not exist, stopping all routing without confirming, no reason.

The matrix is split in two: rules for a plain pair (no kinds, skills or via) are the grid's
cells, posted as hidden `cell` inputs ("caller target action"); rules with kinds, skills or
`via` (a grant to a chain's root caller through the agents named) are rows.
In the document the rows come first, so for the same pair a narrower rule is checked before
the cell's (the most specific rule wins, see `a2a_core.policy.decide`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from a2a_core.errors import FieldProblem, ValidationFailed
from a2a_core.schemas.policy import ANY, parse_policy
from dashboard.policy_form import (
    APPROVALS,
    CONTENT,
    LABELS,
    LIMITS,
    MAX_ROWS,
    OPPOSITE,
    OVERRIDES,
    OWN_ACTIONS,
    REDIRECTS,
    RULES,
    SECTIONS,
    SLUG,
    Cell,
    Input,
    Row,
    Section,
    as_text,
    friendly,
    nullable_number,
    prefixed,
    words,
)


class PolicyDraft:
    """The editor's state: built from a stored document or from a posted form."""

    def __init__(self) -> None:
        self.inputs: dict[str, Input] = {}
        self.rows: dict[str, list[Row]] = {name: [] for name in SECTIONS}
        self.cells: dict[tuple[str, str], str] = {}
        self.errors: list[str] = []
        self.confirm_stop = False
        # document path -> the input (or row) it came from; filled by `document()`
        self._origin: dict[str, str] = {}
        self.routing = self._input("routingEnabled", "on")
        self.default_action = self._input("defaultAction", "allow")
        self.limits = [self._input(f"limits.{name}", "", label) for name, label in LIMITS]
        self.max_hops = self._input("maxHops", "5")
        self.loop_detection = self._input("loopDetection", "on")
        self.breaker_enabled = self._input("breaker.enabled", "on")
        self.breaker_threshold = self._input("breaker.failureThreshold", "5")
        self.breaker_cooldown = self._input("breaker.cooldownSeconds", "30")
        self.reason = self._input("reason", "")
        self.last = self._input("last", "1000")
        # The version active when the editor was opened: saving over a newer one asks first.
        self.base = self._input("base", "")

    def _input(self, name: str, value: str, label: str = "") -> Input:
        made = Input(name=name, value=value, label=label)
        self.inputs[name] = made
        return made

    # --- building ---------------------------------------------------------------------------

    @classmethod
    def from_document(cls, document: Mapping[str, Any]) -> PolicyDraft:
        """The form for a policy document (normalised first: every field present)."""
        doc = parse_policy(dict(document)).as_document()
        draft = cls()
        draft.routing.value = "on" if doc["routingEnabled"] else "off"
        draft.default_action.value = doc["defaultAction"]
        for limit in draft.limits:
            limit.value = as_text(doc["limits"][limit.name.split(".", 1)[1]])
        draft.max_hops.value = as_text(doc["maxHops"])
        draft.loop_detection.value = "on" if doc["loopDetection"] else ""
        draft.breaker_enabled.value = "on" if doc["breaker"]["enabled"] else ""
        draft.breaker_threshold.value = as_text(doc["breaker"]["failureThreshold"])
        draft.breaker_cooldown.value = as_text(doc["breaker"]["cooldownSeconds"])
        for rule in doc["matrix"]:
            pair = (rule["caller"], rule["target"])
            if rule["kinds"] or rule["skills"] or rule.get("via"):
                draft._add_row(RULES, rule)
            elif pair not in draft.cells:
                # A later plain rule for the same pair never applies: the first one wins.
                draft.cells[pair] = rule["action"]
        for slug, limits in doc["agentLimits"].items():
            draft._add_row(OVERRIDES, {"agent": slug, **limits})
        for rule in doc["approvals"]:
            draft._add_row(APPROVALS, rule)
        for rule in doc["redirects"]:
            draft._add_row(REDIRECTS, rule)
        for rule in doc["contentRules"]:
            draft._add_row(CONTENT, {**rule, "examples": "\n".join(rule["examples"])})
        return draft

    @classmethod
    def from_post(cls, data: Any) -> PolicyDraft:
        """The form as posted (a QueryDict). Rows are renumbered in the order they came."""
        draft = cls()
        draft.routing.value = "off" if data.get("routingEnabled") == "off" else "on"
        draft.confirm_stop = bool(data.get("confirmStop"))
        for name in (
            "defaultAction",
            *(limit.name for limit in draft.limits),
            "maxHops",
            "breaker.failureThreshold",
            "breaker.cooldownSeconds",
            "reason",
            "last",
            "base",
        ):
            draft.inputs[name].value = str(data.get(name, ""))[:2000]
        draft.loop_detection.value = "on" if data.get("loopDetection") else ""
        draft.breaker_enabled.value = "on" if data.get("breaker.enabled") else ""
        for cell in data.getlist("cell")[:100_000]:
            parts = str(cell).split()
            if len(parts) == 3:
                draft.cells[(parts[0], parts[1])] = parts[2]
        for section in SECTIONS.values():
            found = re.compile(rf"^{section.name}-(\d+)-")
            numbers = sorted({int(m.group(1)) for key in data if (m := found.match(key))})
            for number in numbers[:MAX_ROWS]:
                prefix = f"{section.name}-{number}-"
                values: dict[str, Any] = {
                    name: data.getlist(prefix + name)
                    if name in section.multi
                    else str(data.get(prefix + name, ""))
                    for name in section.fields
                }
                draft._add_row(section, values, raw=True)
        return draft

    def _add_row(self, section: Section, values: Mapping[str, Any], *, raw: bool = False) -> Row:
        rows = self.rows[section.name]
        key = f"{section.name}-{len(rows)}"
        inputs = {}
        for name in section.fields:
            value = values.get(name)
            made = Input(name=f"{key}-{name}", label=LABELS.get(name, ""))
            if name in section.multi:
                made.chosen = [str(v) for v in (value or [])]
            elif name == "examples":
                made.value = str(value or "")[:20_000]
            else:
                made.value = str(value or "")[:2000] if raw else as_text(value)
            inputs[name] = made
            self.inputs[made.name] = made
        row = Row(key=key, inputs=inputs)
        rows.append(row)
        return row

    # --- what the editor's buttons do -------------------------------------------------------

    def apply(self, *, cycle: str = "", add: str = "", remove: str = "") -> None:
        """One step of editing: cycle a cell ("caller target"), add a blank row to a section,
        remove a row ("rule-2")."""
        if cycle:
            parts = cycle.split()
            if len(parts) == 2:
                pair = (parts[0], parts[1])
                after = self._next(pair)
                if after:
                    self.cells[pair] = after
                else:
                    self.cells.pop(pair, None)
        if add in SECTIONS:
            self._add_row(SECTIONS[add], self._blank(add))
        if remove:
            name = remove.rpartition("-")[0]
            if name in SECTIONS:
                self._renumber(SECTIONS[name], [r for r in self.rows[name] if r.key != remove])

    def _next(self, pair: tuple[str, str]) -> str:
        """A click's result on a cell: an inherited value turns into its opposite, then the
        cell goes through the other own rules and back to inheriting ("")."""
        inherited = self.inherited(*pair)[0]
        first = OPPOSITE[inherited]
        order = [first, *(a for a in OWN_ACTIONS if a not in (first, inherited))]
        own = self.cells.get(pair, "")
        if own not in order:  # no rule of its own, or one equal to what it inherits
            return order[0]
        following = order.index(own) + 1
        return order[following] if following < len(order) else ""

    def _renumber(self, section: Section, keep: list[Row]) -> None:
        for row in self.rows[section.name]:
            for made in row.inputs.values():
                del self.inputs[made.name]
        self.rows[section.name] = []
        for row in keep:
            self._add_row(
                section,
                {f: row[f].chosen if f in section.multi else row[f].value for f in section.fields},
                raw=True,
            )

    def _blank(self, section: str) -> dict[str, Any]:
        if section == "override":
            # An override replaces the global limits for that caller: start from them.
            return {limit.name.split(".", 1)[1]: limit.value for limit in self.limits}
        if section == "approval":
            return {"timeoutOutcome": "reject"}
        if section == "redirect":
            return {"targets": "*", "when": ["suspended", "circuit_open"]}
        if section == "content":
            return {"detect": "secrets", "direction": "request", "action": "redact"}
        return {"action": "deny"}

    # --- the document -----------------------------------------------------------------------

    def document(self) -> dict[str, Any]:
        """The policy document the form describes (not validated), noting where each part
        came from."""
        origin = self._origin = {}
        for name in self.inputs:
            if not re.match(r"^[a-z]+-\d+-", name):
                origin[name] = name
        matrix: list[dict[str, Any]] = []
        for row in self._filled(RULES):
            where = f"matrix.{len(matrix)}"
            origin[where] = row.key
            for name in RULES.fields:
                origin[f"{where}.{name}"] = row[name].name
            matrix.append(
                {
                    "caller": row["caller"].value.strip(),
                    "target": row["target"].value.strip(),
                    "action": row["action"].value,
                    "kinds": words(row["kinds"].value),
                    "skills": words(row["skills"].value),
                    "via": words(row["via"].value),
                }
            )
        for (caller, target), action in self.cells.items():
            origin[f"matrix.{len(matrix)}"] = f"cell {caller} -> {target}"
            matrix.append({"caller": caller, "target": target, "action": action})
        agent_limits: dict[str, Any] = {}
        for row in self._filled(OVERRIDES):
            slug = row["agent"].value.strip()
            origin[f"agentLimits.{slug}"] = row.key
            for name, _ in LIMITS:
                origin[f"agentLimits.{slug}.{name}"] = row[name].name
            agent_limits[slug] = {name: nullable_number(row[name].value) for name, _ in LIMITS}
        approvals: list[dict[str, Any]] = []
        for row in self._filled(APPROVALS):
            where = f"approvals.{len(approvals)}"
            origin[where] = row.key
            for name in APPROVALS.fields:
                origin[f"{where}.{name}"] = row[name].name
            approvals.append(
                {
                    "name": row["name"].value.strip(),
                    "kinds": words(row["kinds"].value),
                    "skills": words(row["skills"].value),
                    "priorities": row["priorities"].chosen,
                    "callers": words(row["callers"].value),
                    "targets": words(row["targets"].value),
                    "deadlineSeconds": nullable_number(row["deadlineSeconds"].value),
                    "timeoutOutcome": row["timeoutOutcome"].value,
                }
            )
        redirects: list[dict[str, Any]] = []
        for row in self._filled(REDIRECTS):
            where = f"redirects.{len(redirects)}"
            origin[where] = row.key
            for name in REDIRECTS.fields:
                origin[f"{where}.{name}"] = row[name].name
            redirects.append(
                {
                    "targets": words(row["targets"].value) or [ANY],
                    "when": row["when"].chosen,
                    "to": words(row["to"].value),
                }
            )
        content: list[dict[str, Any]] = []
        for row in self._filled(CONTENT):
            where = f"contentRules.{len(content)}"
            origin[where] = row.key
            for name in CONTENT.fields:
                origin[f"{where}.{name}"] = row[name].name
            rule: dict[str, Any] = {
                "name": row["name"].value.strip(),
                "detect": row["detect"].value,
                "direction": row["direction"].value,
                "action": row["action"].value,
                "reason": row["reason"].value.strip(),
                "callers": words(row["callers"].value),
                "targets": words(row["targets"].value),
                "kinds": words(row["kinds"].value),
                "skills": words(row["skills"].value),
                "examples": [line for line in row["examples"].value.splitlines() if line.strip()],
            }
            if row["pattern"].value.strip():
                rule["pattern"] = row["pattern"].value.strip()
            content.append(rule)
        return {
            "routingEnabled": self.routing.value != "off",
            "defaultAction": self.default_action.value,
            "matrix": matrix,
            "limits": {
                limit.name.split(".", 1)[1]: nullable_number(limit.value) for limit in self.limits
            },
            "agentLimits": agent_limits,
            "maxHops": self.max_hops.value.strip(),
            "loopDetection": bool(self.loop_detection.value),
            "breaker": {
                "enabled": bool(self.breaker_enabled.value),
                "failureThreshold": self.breaker_threshold.value.strip(),
                "cooldownSeconds": self.breaker_cooldown.value.strip(),
            },
            "approvals": approvals,
            "redirects": redirects,
            "contentRules": content,
        }

    def _filled(self, section: Section) -> list[Row]:
        return [row for row in self.rows[section.name] if row.filled(section)]

    def validated(self, *, known: set[str], routing_on: bool, publishing: bool) -> dict[str, Any]:
        """The document, valid: raises `ValidationFailed` listing every problem, each under
        the name of the input it belongs to. `known`: the agent slugs a rule may name.
        `routing_on`: whether routing runs now (stopping it needs the confirmation box).
        `publishing`: a reason is required."""
        document = self.document()
        problems = self._form_problems(known=known, routing_on=routing_on, publishing=publishing)
        try:
            document = parse_policy(document).as_document()
        except ValidationFailed as exc:
            problems.extend(exc.problems)
        if problems:
            count = len(problems)
            raise ValidationFailed(
                f"{count} problem{'s' if count != 1 else ''}; nothing was saved", problems
            )
        return document

    def _form_problems(
        self, *, known: set[str], routing_on: bool, publishing: bool
    ) -> list[FieldProblem]:
        problems = []
        if publishing and not self.reason.value.strip():
            problems.append(
                FieldProblem("reason", "say why the policy changes; it is kept in the history")
            )
        if routing_on and self.routing.value == "off" and not self.confirm_stop:
            problems.append(
                FieldProblem(
                    "routingEnabled",
                    "stopping routing refuses every message between agents: tick the box to "
                    "confirm",
                )
            )

        def unknown(where: Input, slugs: Iterable[str], *, one_agent: bool = False) -> None:
            """Problems with the agents a rule names: `one_agent` fields name one agent
            (not `*`) and are not checked by the schema's pattern."""
            for slug in slugs:
                if slug == ANY:
                    if one_agent:
                        problems.append(FieldProblem(where.name, "name one agent, not *"))
                elif not SLUG.match(slug):
                    if one_agent:
                        problems.append(FieldProblem(where.name, "an agent id: a-z, 0-9, - and _"))
                elif slug not in known:
                    problems.append(
                        FieldProblem(where.name, f"no agent named {slug!r} is registered")
                    )

        for row in self._filled(RULES):
            unknown(row["caller"], words(row["caller"].value))
            unknown(row["target"], words(row["target"].value))
            unknown(row["via"], words(row["via"].value))
        seen: set[str] = set()
        for row in self._filled(OVERRIDES):
            slug = row["agent"].value.strip()
            if not slug:
                problems.append(
                    FieldProblem(row["agent"].name, "which agent do these limits apply to?")
                )
            elif slug in seen:
                problems.append(
                    FieldProblem(row["agent"].name, f"{slug} has its limits above already")
                )
            else:
                unknown(row["agent"], [slug], one_agent=True)
            seen.add(slug)
        for row in self._filled(APPROVALS):
            unknown(row["callers"], words(row["callers"].value))
            unknown(row["targets"], words(row["targets"].value))
        for row in self._filled(REDIRECTS):
            unknown(row["targets"], words(row["targets"].value))
            unknown(row["to"], words(row["to"].value), one_agent=True)
        for row in self._filled(CONTENT):
            unknown(row["callers"], words(row["callers"].value))
            unknown(row["targets"], words(row["targets"].value))
        return problems

    # --- problems -----------------------------------------------------------------------------

    def show(self, problems: Iterable[FieldProblem]) -> None:
        """File each problem under its input (a document path is traced back to the input it
        came from); what belongs to no input is listed for the whole form."""
        if not self._origin:
            self.document()
        rows = {row.key: row for rows in self.rows.values() for row in rows}
        for problem in problems:
            name, rest = self._trace(problem.field)
            if name in rows:
                rows[name].errors.append(prefixed(rest, friendly(problem.message, blank=False)))
            elif name in self.inputs:
                found = self.inputs[name]
                blank = not rest and not found.value.strip()
                found.errors.append(prefixed(rest, friendly(problem.message, blank=blank)))
            else:
                self.errors.append(prefixed(name, friendly(problem.message, blank=False)))

    def _trace(self, path: str) -> tuple[str, str]:
        """(input or row name, what is left of the path) for a problem's path."""
        steps = path.split(".")
        for end in range(len(steps), 0, -1):
            found = self._origin.get(".".join(steps[:end]))
            if found is not None:
                rest = steps[end:]
                return found, (
                    f"item {int(rest[0]) + 1}" if rest and rest[0].isdigit() else ".".join(rest)
                )
        return path, ""

    @property
    def problem_count(self) -> int:
        return (
            len(self.errors)
            + sum(len(i.errors) for i in self.inputs.values())
            + sum(len(r.errors) for rows in self.rows.values() for r in rows)
        )

    # --- the grid -------------------------------------------------------------------------------

    def named_agents(self) -> set[str]:
        """Slugs the grid's cells name (they get a row and a column even if not registered)."""
        return {slug for pair in self.cells for slug in pair} - {ANY}

    def effective(self, caller: str, target: str) -> tuple[str, bool, str]:
        """(action, own rule?, where it comes from) for a plain message from caller to target."""
        if (caller, target) in self.cells:
            return self.cells[(caller, target)], True, "this pair's own rule"
        return self.inherited(caller, target)

    def inherited(self, caller: str, target: str) -> tuple[str, bool, str]:
        """What the cell would be without a rule of its own: (action, False, where from)."""
        for key in ((caller, ANY), (ANY, target), (ANY, ANY)):
            if key in self.cells and key != (caller, target):
                return self.cells[key], False, f"inherited from {key[0]} → {key[1]}"
        return self.default_action.value, False, "the default for pairs without a rule"

    def grid(self, slugs: list[str]) -> list[tuple[str, list[Cell]]]:
        """Rows of cells: callers `*` then `slugs`, against targets `*` then `slugs`."""
        narrower: dict[tuple[str, str], int] = {}
        for row in self._filled(RULES):
            pair = (row["caller"].value.strip(), row["target"].value.strip())
            narrower[pair] = narrower.get(pair, 0) + 1
        names = [ANY, *slugs]
        grid = []
        for caller in names:
            cells = []
            for target in names:
                action, own, why = self.effective(caller, target)
                cells.append(
                    Cell(caller, target, action, own, why, narrower.get((caller, target), 0))
                )
            grid.append((caller, cells))
        return grid

    def hidden_cells(self, shown: set[str]) -> list[tuple[str, str, str]]:
        """Cell rules for agents the grid does not show (it shows at most so many)."""
        shown = shown | {ANY}
        return [
            (caller, target, action)
            for (caller, target), action in self.cells.items()
            if caller not in shown or target not in shown
        ]
