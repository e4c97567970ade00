"""Content guardrails: the detectors run over a message's parts, and what the policy's
content rules make of their hits.

Pure like `decide`: no Django, no I/O, no clock. The call path scans a message (or an agent's
answer) once with `content_scan`, before judging it; `decide` (and, for answers, the
recorder) turns the hits into a verdict with `content_verdict`; `redact` makes the form the
hub stores, shows and (unless a human approves a held message) delivers.

What is scanned: every part's `text`, every string and number inside its `data` (at any
depth, keys excepted), a file part's `url` and `filename` (and the 0.3 `file.uri`/`file.name`);
never raw bytes or metadata. Each detector runs once per message, however many rules use
it; only the detectors of the rules that apply to the message (its direction, caller,
target, kind and skill) run at all.

Detectors (`a2a_core.policy.detectors`, `a2a_core.policy.secrets`): `secrets` — Yelp's detect-secrets plugins (its default set, the high-entropy
string plugins excepted: in prose they flag hashes and ids far more often than secrets);
`card` — 13 to 19 digits (spaces or dashes between) passing the Luhn checksum; `iban` — the
IBAN check digits (python-stdnum); `email` — an address with a dotted domain; `phone` —
numbers in international form (`+` and country code) that `phonenumbers` finds valid;
`pattern` — the rule's RE2 expression (linear time: no catastrophic backtracking). One RE2
pass over each text, made of every applicable detector's candidates, first says whether
any detector can find anything there at all (`ContentRules.prefilter`).

A hit never leaves this module with the text it matched: findings carry the rule, the
kind, where (the JSON path of the string) and the span.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import re2

from a2a_core.policy.detectors import BUILTIN, CANDIDATES, DIGIT, compile_pattern, re2_options

if TYPE_CHECKING:
    from a2a_core.schemas.policy import ContentRule

ANY = "*"
Path = tuple[str | int, ...]
Action = Literal["hold", "redact", "reject"]
# How deep the detectors walk a data part; deeper values are not scanned (the hub's own
# message checks refuse far shallower documents long before this).
MAX_DEPTH = 64
STRENGTH: dict[str, int] = {"redact": 1, "hold": 2, "reject": 3}
# Scopes (direction, caller, target, kind, skill) whose applicable rules a policy remembers.
MAX_SCOPES = 4096
# RE2's memory budget for a prefilter (its default, 8 MB, is short of 200 long patterns).
PREFILTER_MEMORY = 64 << 20


@dataclass(frozen=True, slots=True)
class Hit:
    """One match of one detector: `detector` is the rule's `detect`, or `pattern:<rule>`."""

    detector: str
    path: Path
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class Finding:
    """A hit a rule claimed: what the hub records and shows (never the matched text)."""

    rule: str
    kind: str
    path: Path
    start: int
    end: int

    def where(self) -> str:
        out = ""
        for step in self.path:
            out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else step)
        return out

    def as_record(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "kind": self.kind,
            "where": self.where(),
            "start": self.start,
            "length": self.end - self.start,
        }


@dataclass(frozen=True, slots=True)
class Verdict:
    """The strongest action the applicable rules ask for (None: nothing found), the first
    rule asking it, and every finding of every rule that matched."""

    action: Action | None = None
    rule: str = ""
    kind: str = ""
    reason: str = ""
    findings: tuple[Finding, ...] = ()


NOTHING = Verdict()


# --- compiling ------------------------------------------------------------------------------


def _detector(rule: ContentRule) -> str:
    return f"pattern:{rule.name}" if rule.detect == "pattern" else rule.detect


def _kind(rule: ContentRule) -> str:
    """What `[redacted: <kind>]` says: the detector, or a pattern rule's name."""
    return {"secrets": "secret", "pattern": rule.name}.get(rule.detect, rule.detect)


def _scoped(
    rule: ContentRule, direction: str, caller: str, target: str, kind: str, skill: str
) -> bool:
    return (
        (rule.direction == "both" or rule.direction == direction)
        and (not rule.callers or ANY in rule.callers or caller in rule.callers)
        and (not rule.targets or ANY in rule.targets or target in rule.targets)
        and (not rule.kinds or kind in rule.kinds)
        and (not rule.skills or skill in rule.skills)
    )


class ContentRules:
    """A policy's content rules with their patterns compiled once (per policy version)."""

    def __init__(self, rules: Sequence[ContentRule]) -> None:
        self.rules = tuple(rules)
        self.patterns = {
            rule.name: compile_pattern(rule.pattern)
            for rule in self.rules
            if rule.pattern is not None
        }
        self._sources = {r.name: r.pattern for r in self.rules if r.pattern is not None}
        self._prefilters: dict[frozenset[str], Any] = {}
        self._applicable: dict[tuple[str, ...], tuple[ContentRule, ...]] = {}
        self._detectors: dict[tuple[int, ...], frozenset[str]] = {}

    def prefilter(self, detectors: frozenset[str]) -> Any:
        """One RE2 expression that matches somewhere in a text if, and only if, one of the
        detectors' candidates does (an alternation matches where any of its branches does):
        a text it does not match, most of them, is done in one linear pass however many
        rules apply. None when RE2 cannot take it all at once (each detector runs then)."""
        if detectors not in self._prefilters:
            sources = []
            for detector in sorted(detectors):
                if detector.startswith("pattern:"):
                    sources.append(self._sources[detector.removeprefix("pattern:")])
                else:
                    sources.append(CANDIDATES[detector]())
            options = re2_options()
            options.max_mem = PREFILTER_MEMORY
            try:
                combined = re2.compile("|".join(f"(?:{s})" for s in sources), options=options)
            except re2.error:
                combined = None
            self._prefilters[detectors] = combined
        return self._prefilters[detectors]

    def applicable(
        self, *, direction: str, caller: str, target: str, kind: str, skill: str
    ) -> tuple[ContentRule, ...]:
        """The rules in scope, in order; remembered per scope (a bounded number of them)."""
        key = (direction, caller, target, kind, skill)
        found = self._applicable.get(key)
        if found is None:
            if len(self._applicable) >= MAX_SCOPES:
                self._applicable.clear()
            found = tuple(r for r in self.rules if _scoped(r, *key))
            self._applicable[key] = found
        return found

    def detectors(self, rules: Sequence[ContentRule]) -> frozenset[str]:
        """The detectors `rules` (an `applicable` answer) need."""
        # By identity: the rules are this policy's own (and a rule with lists is unhashable).
        key = tuple(id(rule) for rule in rules)
        found = self._detectors.get(key)
        if found is None:
            if len(self._detectors) >= MAX_SCOPES:
                self._detectors.clear()
            found = self._detectors[key] = frozenset(_detector(rule) for rule in rules)
        return found


# --- what is scanned ------------------------------------------------------------------------


def _walk(value: Any, path: Path) -> Iterator[tuple[Path, str]]:
    """Every string (and number) in a JSON value, with its path; iterative, depth-bounded."""
    stack: list[tuple[Any, Path]] = [(value, path)]
    while stack:
        node, at = stack.pop()
        if isinstance(node, str):
            yield at, node
        elif isinstance(node, bool) or node is None:
            continue
        elif isinstance(node, int | float):
            yield at, str(node)
        elif len(at) - len(path) >= MAX_DEPTH:
            continue
        elif isinstance(node, Mapping):
            stack.extend((v, (*at, k)) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((v, (*at, i)) for i, v in reversed(list(enumerate(node))))


def texts(parts: Any, root: Path = ("parts",)) -> list[tuple[Path, str]]:
    """The scanned strings of a list of A2A parts (dict form), with their JSON paths."""
    found: list[tuple[Path, str]] = []
    if not isinstance(parts, list):
        return found
    for index, part in enumerate(parts):
        if not isinstance(part, Mapping):
            continue
        at = (*root, index)
        for key in ("text", "url", "filename"):
            if isinstance(part.get(key), str):
                found.append(((*at, key), part[key]))
        if "data" in part:
            found.extend(_walk(part["data"], (*at, "data")))
        file = part.get("file")
        if isinstance(file, Mapping):
            for key in ("uri", "name"):
                if isinstance(file.get(key), str):
                    found.append(((*at, "file", key), file[key]))
    return found


def _spans(detector: str, rule_patterns: Mapping[str, Any], text: str) -> list[tuple[int, int]]:
    if detector.startswith("pattern:"):
        pattern = rule_patterns[detector.removeprefix("pattern:")]
        return [m.span() for m in pattern.finditer(text) if m.end() > m.start()]
    if not DIGIT.search(text) and detector in ("card", "iban", "phone"):
        return []
    return BUILTIN[detector](text)


def scan_texts(
    found: Sequence[tuple[Path, str]],
    detectors: Iterable[str],
    patterns: Mapping[str, Any],
    prefilter: Any = None,
) -> tuple[Hit, ...]:
    """Run each detector once over every scanned string that `prefilter` (if given) says
    may hold something."""
    if prefilter is not None:
        found = [(path, text) for path, text in found if prefilter.search(text)]
    hits: list[Hit] = []
    for detector in sorted(detectors):
        for path, text in found:
            hits.extend(Hit(detector, path, a, b) for a, b in _spans(detector, patterns, text))
    return tuple(hits)


_MARKER = re.compile(r"\[redacted: ([^\]\n]{1,80})\]")
_DETECTOR_OF_KIND = {
    "secret": "secrets",
    "card": "card",
    "iban": "iban",
    "email": "email",
    "phone": "phone",
}


def marker_hits(found: Sequence[tuple[Path, str]], detectors: Iterable[str]) -> list[Hit]:
    """Hits for the `[redacted: <kind>]` marks in text the hub stored redacted: what was
    found there before, for a replay of the record (the dry-run). A pattern rule's kind is
    its name, so a mark counts for the rule of that name."""
    hits = []
    detectors = set(detectors)
    for path, text in found:
        if "[redacted: " not in text:
            continue
        for match in _MARKER.finditer(text):
            kind = match.group(1)
            detector = _DETECTOR_OF_KIND.get(kind, f"pattern:{kind}")
            if detector in detectors:
                hits.append(Hit(detector, path, *match.span()))
    return hits


def content_scan(
    document: Mapping[str, Any],
    compiled: ContentRules,
    *,
    direction: str,
    caller: str,
    target: str,
    kind: str = "request",
    skill: str = "",
    part_lists: Sequence[Path] = (("parts",),),
    recorded: bool = False,
) -> tuple[Hit, ...]:
    """What the detectors of the rules that apply find in `document` (a Message, or a task
    or stream event, in dict form): in each list of parts at `part_lists` (paths from the
    document's root). `recorded`: the document is one the hub stored, maybe redacted
    already; its redaction marks count as hits (`marker_hits`)."""
    if not compiled.rules:
        return ()
    rules = compiled.applicable(
        direction=direction, caller=caller, target=target, kind=kind, skill=skill
    )
    if not rules:
        return ()
    found: list[tuple[Path, str]] = []
    for root in part_lists:
        node: Any = document
        for step in root:
            node = node[step]
        found.extend(texts(node, root))
    if not found:
        return ()
    detectors = compiled.detectors(rules)
    prefilter = compiled.prefilter(detectors)
    hits = scan_texts(found, set(detectors), compiled.patterns, prefilter)
    return (*hits, *marker_hits(found, detectors)) if recorded else hits


def content_verdict(
    hits: Sequence[Hit],
    compiled: ContentRules,
    *,
    direction: str,
    caller: str,
    target: str,
    kind: str = "request",
    skill: str = "",
) -> Verdict:
    """The rules' verdict on the hits: the strongest action asked (reject over hold over
    redact), by the first rule asking it; each hit is claimed by the first rule that wants
    it, and the deciding rule's findings come first."""
    if not hits:
        return NOTHING
    by_detector: dict[str, list[Hit]] = {}
    for hit in hits:
        by_detector.setdefault(hit.detector, []).append(hit)
    best: ContentRule | None = None
    findings: dict[tuple[Path, int, int], Finding] = {}
    for rule in compiled.applicable(
        direction=direction, caller=caller, target=target, kind=kind, skill=skill
    ):
        matched = by_detector.get(_detector(rule))
        if not matched:
            continue
        if best is None or STRENGTH[rule.action] > STRENGTH[best.action]:
            best = rule
        for hit in matched:
            key = (hit.path, hit.start, hit.end)
            if key not in findings:
                findings[key] = Finding(rule.name, _kind(rule), hit.path, hit.start, hit.end)
    if best is None:
        return NOTHING
    # The deciding rule's findings first: a decision's first finding names its rule.
    ordered = sorted(findings.values(), key=lambda f: f.rule != best.name)
    return Verdict(best.action, best.name, _kind(best), best.reason, tuple(ordered))


def rule_finds(rule: ContentRule, text: str) -> bool:
    """Whether `rule`'s detector finds something in `text` (a rule's examples)."""
    detector = _detector(rule)
    patterns = {rule.name: compile_pattern(rule.pattern)} if rule.pattern is not None else {}
    return bool(_spans(detector, patterns, text))


# --- redacting --------------------------------------------------------------------------------


def mask(kind: str) -> str:
    return f"[redacted: {kind}]"


def _masked(text: str, spans: list[tuple[int, int, str]]) -> str:
    out, last = [], 0
    for start, end, kind in sorted(spans):
        if start < last:  # overlaps the previous span: already masked
            continue
        out.append(text[last:start])
        out.append(mask(kind))
        last = end
    out.append(text[last:])
    return "".join(out)


def redact(document: Mapping[str, Any], findings: Sequence[Finding]) -> dict[str, Any]:
    """A copy of `document` (a message, task or event in dict form) with each finding's text
    replaced by `[redacted: <kind>]`; the original is left as it was. Only the containers
    on a finding's path are copied."""
    by_path: dict[Path, list[tuple[int, int, str]]] = {}
    for finding in findings:
        by_path.setdefault(finding.path, []).append((finding.start, finding.end, finding.kind))
    copy: dict[str, Any] = dict(document)
    copied: set[Path] = {()}
    for path, spans in by_path.items():
        node: Any = copy
        for depth in range(len(path) - 1):
            step = path[depth]
            prefix = path[: depth + 1]
            if prefix not in copied:
                child = node[step]
                node[step] = dict(child) if isinstance(child, Mapping) else list(child)
                copied.add(prefix)
            node = node[step]
        value = node[path[-1]]
        # A number is masked whole: a string with a part of it masked would mean nothing.
        node[path[-1]] = _masked(value, spans) if isinstance(value, str) else mask(spans[0][2])
    return copy
