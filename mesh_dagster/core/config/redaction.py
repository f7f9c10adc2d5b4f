"""Secrets out of everything mesh prints or logs: connection settings, URLs, error messages.

What counts as a secret, in one place:

- a setting whose name has one of the words of `SECRET_WORDS` (`spark.hadoop.fs.s3a.secret.key`,
  `fs.s3a.access.key`, `metastore.password`, `fs.azure.sas.token`, `spark.authenticate.secret`,
  `clientSecret`...). Names are split into words at `.`, `_`, `-` and lower-to-upper case changes,
  so `spark.sql.shuffle.partitions` or `spark.authenticate` are not secrets, `accessKey` is;
- the same words as URL parameters (`sc://host:15002/;token=...`, `jdbc:...?password=...`);
- the password of a URL's user info (`https://user:password@host/...`): everything up to the last
  `@` before a space, since a password written unescaped may hold `@`, `/` or `#` itself and no
  parser can tell where it ends (`postgresql://me:p@ss/w#rd@db/state` shows `me:***@db/state`).

Their values are shown as `***`. A name that merely looks like a secret (a key store's path) is
hidden too: a hidden path costs a look at config.yaml, a shown password cannot be taken back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

HIDDEN = "***"
SECRET_WORDS = frozenset({"secret", "secrets", "password", "passwd", "pwd", "token", "tokens", "key", "keys",
                          "credential", "credentials", "auth", "sas", "passphrase"})

_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")
# `;token=abc` or `?password=abc` / `&password=abc`: a parameter of a URL (Spark Connect, JDBC).
_PARAMETER = re.compile(r"([;?&]\s*)([A-Za-z][\w.-]*)(\s*=\s*)([^;&\s]*)")
# `scheme://user:password@` (the user stays: it says who connects), to the last `@` of the URL.
_USERINFO = re.compile(r"([A-Za-z][\w+.-]*://[^\s/@:]*:)(\S*)(@)")


def name_words(name: str) -> list[str]:
    """The words of a name, split at `.`, `_`, `-` and lower-to-upper case changes (`accessKey`:
    access, Key; `API_token2`: API, token, 2)."""
    return _WORD.findall(name)


def is_secret_name(name: str) -> bool:
    """Whether a setting called `name` holds a secret (see the module docstring)."""
    return any(word.lower() in SECRET_WORDS for word in name_words(str(name)))


def redact_text(text: str) -> str:
    """`text` with URL passwords and secret URL parameters replaced by `***`."""
    text = _USERINFO.sub(lambda m: m.group(1) + HIDDEN + m.group(3) if m.group(2) else m.group(0), text)
    return _PARAMETER.sub(_parameter, text)


def redact_url(url: str) -> str:
    """`redact_text` for text known to be one whole URL: its password is hidden up to the URL's
    last `@` even when it holds spaces (in free text a space ends a URL)."""
    scheme, separator, rest = url.partition("://")
    userinfo, at, host = rest.rpartition("@")
    if not separator or not at or ":" not in userinfo:
        return redact_text(url)
    return redact_text(f"{scheme}://{userinfo.split(':', 1)[0]}:{HIDDEN}@{host}")


def _parameter(match: re.Match[str]) -> str:
    if not is_secret_name(match.group(2)) or not match.group(4):
        return match.group(0)
    return match.group(1) + match.group(2) + match.group(3) + HIDDEN


def redact_settings(value: Any) -> Any:
    """A copy of `value` (settings as read from config.yaml) with every secret hidden: the value of
    each secret-named key, and secrets inside any text (URLs)."""
    if isinstance(value, Mapping):
        return {key: (HIDDEN if is_secret_name(str(key)) and item not in (None, "") else redact_settings(item))
                for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_settings(item) for item in value]
    if isinstance(value, str):
        return redact_text(value)
    return value


def shorten(text: str, limit: int = 200) -> str:
    """`text` cut to `limit` characters, saying how much was left out: a printed setting stays a line."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"
