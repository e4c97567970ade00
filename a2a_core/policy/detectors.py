"""The built-in content detectors: pure functions from a text to the spans they find.

`secrets` is `a2a_core.policy.secrets`; cards, IBANs, emails and phone numbers are here, each
an RE2 expression for its candidates (linear in the text; `CANDIDATES` gives them to the
one-pass prefilter of `a2a_core.policy.content`) checked by a validator: the Luhn checksum
and the IBAN check digits (python-stdnum), a valid number (phonenumbers).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import phonenumbers
import re2
from stdnum import iban as stdnum_iban
from stdnum import luhn

from a2a_core.policy.secrets import secret_spans, trigger_source


def re2_options() -> Any:
    """RE2 options that keep its parse errors out of the process's stderr."""
    options = re2.Options()
    options.log_errors = False
    return options


def compile_pattern(pattern: str) -> Any:
    """An RE2 expression; ValueError naming the problem when it is not one."""
    try:
        return re2.compile(pattern, options=re2_options())
    except re2.error as exc:
        problem = exc.args[0] if exc.args else exc
        if isinstance(problem, bytes):
            problem = problem.decode(errors="replace")
        raise ValueError(
            f"`pattern` is not a valid RE2 expression ({problem}); RE2 has no lookarounds "
            "or backreferences, which is what keeps matching linear"
        ) from None


_CARD = re2.compile(r"\d(?:[ -]?\d){12,18}")
_IBAN = re2.compile(r"[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}")
_EMAIL = re2.compile(
    r"[A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]{1,64}@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
    r"(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.[A-Za-z]{2,63}"
)
_PHONE = re2.compile(r"\+[0-9][0-9 ().-]{5,22}[0-9]")
DIGIT = re.compile(r"\d")
_WORD = re.compile(r"\w")


def _bounded(text: str, start: int, end: int) -> bool:
    """The match is not part of a longer run of digits or letters."""
    before = text[start - 1] if start > 0 else ""
    after = text[end] if end < len(text) else ""
    return not (_WORD.match(before) or _WORD.match(after))


def find_cards(text: str) -> list[tuple[int, int]]:
    spans = []
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if _bounded(text, *match.span()) and 13 <= len(digits) <= 19 and luhn.is_valid(digits):
            spans.append(match.span())
    return spans


def find_ibans(text: str) -> list[tuple[int, int]]:
    spans = []
    for match in _IBAN.finditer(text):
        start = match.start()
        # The greedy match may run into the next word: shorten it at its spaces until valid.
        candidate = match.group()
        while True:
            if _bounded(text, start, start + len(candidate)) and stdnum_iban.is_valid(candidate):
                spans.append((start, start + len(candidate)))
                break
            cut = candidate.rfind(" ")
            if cut < 15:
                break
            candidate = candidate[:cut]
    return spans


def find_emails(text: str) -> list[tuple[int, int]]:
    if "@" not in text:
        return []
    return [m.span() for m in _EMAIL.finditer(text)]


def find_phones(text: str) -> list[tuple[int, int]]:
    """Numbers in international form: RE2 finds the candidates (a `+`, then 7 to 20 digits
    and separators), `phonenumbers` keeps the valid ones; linear in the text."""
    if "+" not in text:
        return []
    spans: list[tuple[int, int]] = []
    for candidate in _PHONE.finditer(text):
        offset = candidate.start()
        matcher = phonenumbers.PhoneNumberMatcher(
            candidate.group(), None, leniency=phonenumbers.Leniency.VALID
        )
        spans.extend((offset + m.start, offset + m.end) for m in matcher)
    return spans


# Each built-in detector's candidates as RE2 source: every match it can report lies on one.
CANDIDATES: dict[str, Callable[[], str]] = {
    "secrets": trigger_source,
    "card": lambda: str(_CARD.pattern),
    "iban": lambda: str(_IBAN.pattern),
    "email": lambda: str(_EMAIL.pattern),
    "phone": lambda: str(_PHONE.pattern),
}

BUILTIN = {
    "secrets": secret_spans,
    "card": find_cards,
    "iban": find_ibans,
    "email": find_emails,
    "phone": find_phones,
}
