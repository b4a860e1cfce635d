"""Tests of the git source: repositories fetched over git://, HTTP and ssh."""
