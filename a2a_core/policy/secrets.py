"""The `secrets` detector: Yelp's detect-secrets plugins, made fast enough for the call path.

`secret_spans(text)` finds what detect-secrets' default plugins find (AWS keys, GitHub,
GitLab, Slack, Stripe, OpenAI, npm and PyPI tokens, private keys, JWTs, basic-auth URLs,
`password = "..."` assignments and the rest), with their positions; pure and deterministic.
Left out: the two high-entropy-string plugins (in prose they flag hashes, ids and base64
payloads far more often than secrets) and the public IP address plugin (not a secret).
Not used: the plugins' `verify` (it would call the issuers' APIs) and detect-secrets'
global settings (scanning needs none).

The plugins' own regexes are Python regexes; run as they are, the default set costs about
50 ms on 10 KB of text (the keyword plugin most of it). So one RE2 expression made of every
plugin's trigger (its regex, or one loosened to what RE2 accepts: lookarounds dropped,
bounds capped, or its keywords) scans the text once in linear time; only around a trigger
(its line, at most MARGIN characters either side), and only that plugin, run the real
regexes. Measured by
`bench/policy_cost.py --content-rules`: 10 KB of prose with no trigger, about 0.1 ms.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

import re2
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.filters.heuristic import (
    is_potential_uuid,
    is_prefixed_with_dollar_sign,
    is_sequential_string,
    is_templated_secret,
)
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.keyword import DENYLIST as KEYWORDS

LEFT_OUT = frozenset({"Base64HighEntropyString", "HexHighEntropyString", "IPPublicDetector"})
# A match's capture group is the secret when it is at least this long (some plugins
# capture a prefix, `(ghp|gho)_...`, where the whole match is the secret).
MIN_GROUP = 8
# How much text either side of a trigger (within its line) the plugin's own regexes see.
MARGIN = 512
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


@dataclass(frozen=True)
class _Plugin:
    name: str
    plugin: Any
    regexes: tuple[re.Pattern[str], ...]  # empty: a keyword plugin (analyze_string)


def _without_lookarounds(pattern: str) -> str:
    """`pattern` with its lookaround groups removed (a looser pattern: it matches at least
    wherever the original does), for a trigger RE2 accepts."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith(("(?<=", "(?<!", "(?=", "(?!"), i):
            depth, j = 0, i
            while j < len(pattern):
                if pattern[j] == "\\":
                    j += 2
                    continue
                if pattern[j] == "(":
                    depth += 1
                elif pattern[j] == ")":
                    depth -= 1
                    if depth == 0:
                        break
                j += 1
            i = j + 1
            continue
        if pattern[i] == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        out.append(pattern[i])
        i += 1
    loosened = "".join(out)
    # RE2 caps counted repetitions at 1000.
    return re.sub(r"\{(\d+),(\d{4,})\}", r"{\1,}", loosened)


def _plain(regex: re.Pattern[str]) -> str:
    """A verbose regex's pattern without its comments and layout whitespace."""
    if not regex.flags & re.VERBOSE:
        return regex.pattern
    uncommented = re.sub(r"(?<!\\)#.*$", "", regex.pattern, flags=re.MULTILINE)
    return re.sub(r"(?<!\\)\s+", "", uncommented)


def _trigger(regex: re.Pattern[str]) -> str | None:
    flags = "(?i)" if regex.flags & re.IGNORECASE else ""
    plain = _plain(regex)
    for candidate in (plain, _without_lookarounds(plain)):
        try:
            re2.compile(flags + candidate, options=_OPTIONS)
        except re2.error:
            continue
        return f"{flags}(?:{candidate})" if flags else f"(?:{candidate})"
    return None


@cache
def _plugins() -> tuple[list[_Plugin], Any]:
    """The plugins, and one RE2 expression with a named group per plugin (its trigger)."""
    plugins: list[_Plugin] = []
    triggers: list[str] = []
    classes: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    for cls in sorted(classes, key=lambda c: c.__name__):
        if cls.__name__ in LEFT_OUT:
            continue
        plugin = cls()
        if isinstance(plugin, RegexBasedDetector):
            regexes = tuple(plugin.denylist)
            parts = [_trigger(regex) for regex in regexes]
            if any(part is None for part in parts):
                continue
            trigger = "|".join(p for p in parts if p is not None)
        else:
            regexes = ()
            trigger = "(?i)(?:" + "|".join(KEYWORDS) + ")"
        triggers.append(f"(?P<p{len(plugins)}>{trigger})")
        plugins.append(_Plugin(cls.__name__, plugin, regexes))
    return plugins, re2.compile("|".join(triggers), options=_OPTIONS)


def trigger_source() -> str:
    """The RE2 source of every plugin's trigger: it matches wherever a secret may be."""
    return str(_plugins()[1].pattern)


def _plausible(secret: str) -> bool:
    return not (
        is_sequential_string(secret)
        or is_potential_uuid(secret)
        or is_templated_secret(secret)
        or is_prefixed_with_dollar_sign(secret)
    )


def _in_line(plugin: _Plugin, line: str) -> list[tuple[int, int]]:
    spans = []
    if plugin.regexes:
        for regex in plugin.regexes:
            for match in regex.finditer(line):
                span = match.span()
                for group in range(1, (match.lastindex or 0) + 1):
                    start, end = match.span(group)
                    if end - start >= MIN_GROUP:
                        span = (start, end)
                if _plausible(line[span[0] : span[1]]):
                    spans.append(span)
        return spans
    for secret in set(plugin.plugin.analyze_string(line)):
        if not secret or not _plausible(secret):
            continue
        at = line.find(secret)
        while at >= 0:
            spans.append((at, at + len(secret)))
            at = line.find(secret, at + 1)
    return spans


def _key_block(text: str, span: tuple[int, int]) -> tuple[int, int]:
    """A private key's header as far as the end of its block (or of the text)."""
    end = text.find("-----END", span[1])
    if end < 0:
        return span[0], len(text)
    close = text.find("-----", end + 8)
    return span[0], len(text) if close < 0 else close + 5


def _line_at(text: str, position: int) -> tuple[int, int]:
    start = text.rfind("\n", 0, position) + 1
    end = text.find("\n", position)
    return start, len(text) if end < 0 else end


def secret_spans(text: str) -> list[tuple[int, int]]:
    """Where detect-secrets' plugins find secrets in `text`: (start, end) pairs."""
    plugins, trigger = _plugins()
    # Per plugin that fired: the stretches of text around its triggers (within their line,
    # MARGIN either side), merged where they touch.
    regions: dict[int, list[tuple[int, int]]] = {}
    for match in trigger.finditer(text):
        index = int(str(match.lastgroup)[1:])
        line_start, line_end = _line_at(text, match.start())
        start = max(line_start, match.start() - MARGIN)
        end = min(max(line_end, match.end()), match.end() + MARGIN)
        stretches = regions.setdefault(index, [])
        if stretches and start <= stretches[-1][1]:
            stretches[-1] = (stretches[-1][0], max(end, stretches[-1][1]))
        else:
            stretches.append((start, end))
    spans: set[tuple[int, int]] = set()
    for index, stretches in regions.items():
        plugin = plugins[index]
        for start, end in stretches:
            for a, b in _in_line(plugin, text[start:end]):
                span = (start + a, start + b)
                if plugin.name == "PrivateKeyDetector":
                    span = _key_block(text, span)
                spans.add(span)
    return sorted(spans)
