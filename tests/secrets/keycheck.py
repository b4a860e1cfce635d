"""Test helpers for the validation of private keys: count the validated loads
`orksync.secrets.pki` makes, and make an RSA key that only a validated load rejects."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from orksync.secrets import pki


@contextmanager
def validated_loads() -> Iterator[list[str]]:
    """Within the block, every private key `pki` loads with cryptography's consistency
    check is appended to the list yielded, as `digest(pem)` (a failing assertion then
    prints no key)."""
    calls: list[str] = []
    real = serialization.load_pem_private_key

    def counting(data: bytes, password: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs.get("unsafe_skip_rsa_key_validation"):
            calls.append(digest(data))
        return real(data, password, *args, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pki.serialization, "load_pem_private_key", counting)
        yield calls


def digest(pem: bytes) -> str:
    return hashlib.sha256(pem).hexdigest()


def tampered_rsa_key(pem: bytes) -> bytes:
    """`pem`'s RSA key with a wrong private exponent: same public key (it still matches its
    certificate), but inconsistent, so only a validated load refuses it."""
    key = serialization.load_pem_private_key(pem, password=None)
    assert isinstance(key, rsa.RSAPrivateKey)
    n = key.private_numbers()
    bad = rsa.RSAPrivateNumbers(p=n.p, q=n.q, d=n.d + 2, dmp1=n.dmp1, dmq1=n.dmq1,
                                iqmp=n.iqmp, public_numbers=n.public_numbers)
    return bad.private_key(unsafe_skip_rsa_key_validation=True).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption())
