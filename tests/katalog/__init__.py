"""Tests of Katalogs: the loader, the Katalog schema, Komposers, motifs, profiles, CRD schemas,
multi-tenancy rules, bad and fuzzed input."""
