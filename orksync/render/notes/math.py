"""Math notes.

Pure. No I/O, clock and randomness injected.

Arguments are numbers, numeric strings (`"3"`, `"2.5"`), bools (1/0) or nil/"" (0);
anything else is an error. Result type: an int when every argument is an int; otherwise a
float — except that a whole float result of `add`/`sub`/`mul`/`div` comes back as an int
(Orkestra documents `add` as "int64 when the result is whole"; orksync applies the same
rule to the four operations so that `div 8 4` is `2` and `add 999999.5 0.5` prints
`1000000`, not Go's float `1e+06`). `div` is true division (`div 7 2` = 3.5). `mod`
is integer modulo with Go's sign rule (the sign of the dividend: `mod -7 3` = -1).
Division or modulo by zero is an error, and so is an integer result outside int64 (Go
would wrap around silently; Python would grow the number without bound, so that a loop
of `mul $x $x` could take the render's memory and time).

| Function | Signature | Meaning |
|---|---|---|
| `add` | `add a b...` | sum |
| `sub` | `sub a b` | a − b |
| `mul` | `mul a b...` | product |
| `div` | `div a b` | a ÷ b (error when b is 0) |
| `mod` | `mod a b` | integer remainder of a ÷ b, sign of a (error when b is 0) |
| `min` | `min a b...` | the smallest argument |
| `max` | `max a b...` | the largest argument |
| `clamp` | `clamp v lo hi` | v constrained to [lo, hi] = max(lo, min(hi, v)) |
| `abs` | `abs v` | absolute value |
"""

from __future__ import annotations

from typing import Any

from orksync.render.notes._common import Note, NoteError, to_number

Number = int | float


def _args(note: str, values: tuple[Any, ...], minimum: int) -> list[Number]:
    if len(values) < minimum:
        raise NoteError(f"{note}: needs at least {minimum} arguments, got {len(values)}")
    return [to_number(v, note) for v in values]


def _whole(result: Number, numbers: list[Number], note: str) -> Number:
    if all(isinstance(n, int) for n in numbers):
        return _int64(result, note)
    f = float(result)
    if f.is_integer() and abs(f) < 2**63:
        return int(f)
    return f


def _int64(result: Number, note: str) -> Number:
    if isinstance(result, int) and not -(2**63) <= result < 2**63:
        raise NoteError(f"{note}: integer overflow (the result does not fit in 64 bits)")
    return result


def _add(*values: Any) -> Number:
    numbers = _args("add", values, 2)
    return _whole(sum(numbers), numbers, "add")


def _sub(a: Any, b: Any) -> Number:
    numbers = _args("sub", (a, b), 2)
    return _whole(numbers[0] - numbers[1], numbers, "sub")


def _mul(*values: Any) -> Number:
    numbers = _args("mul", values, 2)
    product: Number = 1
    for n in numbers:  # checked at each step: a long argument list cannot build a huge int
        product = _int64(product * n, "mul") if isinstance(n, int) else product * n
    return _whole(product, numbers, "mul")


def _div(a: Any, b: Any) -> Number:
    x, y = _args("div", (a, b), 2)
    if y == 0:
        raise NoteError("div: division by zero")
    if isinstance(x, int) and isinstance(y, int) and x % y == 0:
        return _int64(x // y, "div")
    return _whole(x / y, [x, float(y)], "div")


def _mod(a: Any, b: Any) -> int:
    x, y = (int(n) for n in _args("mod", (a, b), 2))
    if y == 0:
        raise NoteError("mod: division by zero")
    remainder = abs(x) % abs(y)
    return -remainder if x < 0 else remainder


def _pick(note: str, values: tuple[Any, ...], choose: Any) -> Number:
    numbers = _args(note, values, 1)
    winner = choose(numbers)
    if all(isinstance(n, int) for n in numbers):
        return winner
    return float(winner)


def _clamp(v: Any, lo: Any, hi: Any) -> Number:
    numbers = _args("clamp", (v, lo, hi), 3)
    value, low, high = numbers
    result = max(low, min(high, value))
    return result if all(isinstance(n, int) for n in numbers) else float(result)


def _abs(v: Any) -> Number:
    return _int64(abs(to_number(v, "abs")), "abs")


def notes() -> dict[str, Note]:
    return {
        "add": _add,
        "sub": _sub,
        "mul": _mul,
        "div": _div,
        "mod": _mod,
        "min": lambda *values: _pick("min", values, min),
        "max": lambda *values: _pick("max", values, max),
        "clamp": _clamp,
        "abs": _abs,
    }
