"""Secrets: generated values, rotation decisions and certificates (cryptography only in pki)."""
