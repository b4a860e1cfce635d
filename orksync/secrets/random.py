"""The values of the random notes (`randomAlphanumeric`, `randomHex`, `randomBase64`,
`uuidv4`): placeholders when rendering to disk, real values when applying.

No I/O; randomness only in `CryptoRandom`. Every random value a render produces comes from the
`RandomSource` handed to `builtin_functions`.

* `PlaceholderRandom` is used when rendering to disk: a random note renders a placeholder
  token such as `<generate:randomAlphanumeric:32>` so that generated secrets never touch
  rendered files (and the rendering stays deterministic).
* `CryptoRandom` (the `secrets` module) produces real values; it is used at apply time,
  against the live cluster, typically through `fill_generated`, which replaces every
  placeholder token in a text with a fresh value.

The Go dialect's random notes (`orkestra_time.random_notes`) return the token as a
`gosig.RandomValue`: a note computing over it (`len (randomHex 5)`, `sha256sum (uuidv4)`)
is an error, since the value only exists in the cluster; printing it or handing it on
unchanged (`default`, `ternary`, ...) keeps the placeholder. A length of 0 or less gives
"" as in Orkestra; more than 4096 is a ValueError.

| Function | Signature | Meaning |
|---|---|---|
| `randomAlphanumeric` | `randomAlphanumeric n` | n random characters from `[A-Za-z0-9]` |
| `randomHex` | `randomHex n` | n random bytes as 2n lowercase hex characters |
| `randomBase64` | `randomBase64 n` | n random bytes, URL-safe base64 with `=` padding |
| `uuidv4` | `uuidv4` | a random RFC 4122 version-4 UUID, `8-4-4-4-12` lowercase hex |
"""

from __future__ import annotations

import base64
import re
import secrets
import string
import uuid
from typing import Protocol, runtime_checkable

__all__ = ["ALPHANUMERIC", "GENERATE_TOKEN_RE", "MAX_RANDOM_N", "RANDOM_FUNCS", "CryptoRandom",
           "PlaceholderRandom", "RandomSource", "fill_generated", "placeholder"]

ALPHANUMERIC = string.ascii_letters + string.digits
MAX_RANDOM_N = 4096
RANDOM_FUNCS = ("randomAlphanumeric", "randomHex", "randomBase64", "uuidv4")
_SIZED = RANDOM_FUNCS[:3]

GENERATE_TOKEN_RE = re.compile(
    r"<generate:(?:(?P<func>randomAlphanumeric|randomHex|randomBase64):(?P<n>[1-9][0-9]{0,3})"
    r"|(?P<uuid>uuidv4))>")


@runtime_checkable
class RandomSource(Protocol):
    """Produces the value of one random note call: `func` is the note name, `n` its
    argument (None for `uuidv4`)."""

    def token(self, func: str, n: int | None) -> str: ...


def _check(func: str, n: int | None) -> None:
    if func not in RANDOM_FUNCS:
        raise ValueError(f"unknown random function {func!r}: expected one of "
                         f"{', '.join(RANDOM_FUNCS)}")
    if func == "uuidv4":
        if n is not None:
            raise ValueError("uuidv4 takes no argument")
        return
    if n is None or isinstance(n, bool) or not isinstance(n, int):
        raise ValueError(f"{func} needs an integer length, got {n!r}")
    if not 1 <= n <= MAX_RANDOM_N:
        raise ValueError(f"{func} {n}: the length must be between 1 and {MAX_RANDOM_N}")


def placeholder(func: str, n: int | None) -> str:
    """The placeholder token for one call, e.g. `<generate:randomHex:16>`."""
    _check(func, n)
    return "<generate:uuidv4>" if func == "uuidv4" else f"<generate:{func}:{n}>"


class PlaceholderRandom:
    """Render-to-disk source: returns the placeholder token, never a random value."""

    def token(self, func: str, n: int | None) -> str:
        return placeholder(func, n)


class CryptoRandom:
    """Apply-time source: real values from the operating system's CSPRNG (`secrets`)."""

    def token(self, func: str, n: int | None) -> str:
        _check(func, n)
        if func == "uuidv4":
            return str(uuid.UUID(bytes=secrets.token_bytes(16), version=4))
        assert n is not None
        if func == "randomAlphanumeric":
            return "".join(secrets.choice(ALPHANUMERIC) for _ in range(n))
        if func == "randomHex":
            return secrets.token_hex(n)
        return base64.urlsafe_b64encode(secrets.token_bytes(n)).decode("ascii")


def fill_generated(text: str, random: RandomSource) -> str:
    """Replace every placeholder token in `text` with a fresh value from `random`
    (each token gets its own value). Raises ValueError for an out-of-range length."""

    def replace(match: re.Match[str]) -> str:
        if match.group("uuid"):
            return random.token("uuidv4", None)
        return random.token(match.group("func"), int(match.group("n")))

    return GENERATE_TOKEN_RE.sub(replace, text)
