"""Which columns' values a data diff never shows: names that say secret or personal data.

A data diff's sample rows (core/plan/data_diff.py) are user data copied into the plan's record, and
from there into `mesh plans show`, the review summary and Dagster's run pages: a password or a
social security number there is read by everyone who reviews the plan, and kept. So the values of a
column whose name says it holds one are replaced by `***` when the sample is taken, before anything
stores it. NULL stays NULL (a value gone missing is what a review looks for); the counts, and which
columns changed, stay too.

A name says so when its words (split at `_`, `-`, `.`, spaces and case changes, as
core/config/redaction.py splits setting names) hold a pattern's words in a row, the last one also in
plural: `password` masks `user_password_hash` and `Passwords`, `api_key` masks `apiKey` and
`primary_api_key`. `key` alone is not a pattern: `item_key`, `sort_key` and most grains would lose
the values that say which row changed. A column masked that needed not be costs a query in the
development environment; a value shown cannot be taken back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from mesh_dagster.core.config.redaction import name_words

MASKED_BY_DEFAULT = (
    # secrets
    "password", "passwd", "pwd", "passphrase", "secret", "token", "api_key", "apikey", "access_key", "secret_key",
    "private_key", "credential", "otp", "pin_code", "cvv", "cvc",
    # who someone is
    "ssn", "social_security", "national_id", "tax_id", "passport", "driver_license", "drivers_license",
    "first_name", "last_name", "full_name", "surname", "dob", "birth_date", "birthdate", "date_of_birth",
    "birthday",
    # how to reach them
    "email", "e_mail", "phone", "mobile_number", "address", "street", "postcode", "postal_code", "zip_code",
    # their money
    "credit_card", "card_number", "cc_number", "iban", "account_number", "salary",
)

_PATTERN = re.compile(r"[A-Za-z0-9_]+")


def check_pattern(pattern: str) -> str:
    """`pattern` if it is written as a column name's words (config.yaml's `masked_columns`)."""
    if not _PATTERN.fullmatch(pattern) or not _words(pattern):
        raise ValueError(f"'{pattern}' is not a column name pattern: write the words of a name "
                         "(`tax_id`, `iban`), without wildcards; it masks every column whose name holds them")
    return pattern


@dataclass(frozen=True)
class ColumnMask:
    """The patterns whose columns' values are hidden (see the module docstring)."""

    patterns: tuple[str, ...]

    @classmethod
    def with_defaults(cls, extra: Iterable[str] = ()) -> ColumnMask:
        """`MASKED_BY_DEFAULT` and the project's own patterns."""
        return cls((*MASKED_BY_DEFAULT, *extra))

    def hides(self, column: str) -> bool:
        words = _words(column)
        return any(_holds(words, _words(p)) for p in self.patterns)

    def hidden(self, columns: Iterable[str]) -> list[str]:
        """Those of `columns` whose values are hidden, in their order."""
        return [c for c in columns if self.hides(c)]


@cache
def _words(name: str) -> tuple[str, ...]:
    return tuple(w.lower() for w in name_words(name))


def _holds(words: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    """`pattern`'s words in a row among `words`, the last one also as its plural."""
    *first, last = pattern
    for i in range(len(words) - len(pattern) + 1):
        end = words[i + len(first)]
        if list(words[i:i + len(first)]) == first and end in (last, last + "s", last + "es"):
            return True
    return False
