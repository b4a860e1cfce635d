"""Tests of the command line as a user types it, install and deploy, status and tree, the
quickstart."""
