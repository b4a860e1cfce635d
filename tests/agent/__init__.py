"""Tests of the agent: controller, Sync objects, drift repair, leases, leader election, scale-
out, sharding, webhooks, notifications, the web view."""
