"""What happens to a custom resource around the apply: status, Events, onDelete teardown,
autoscale, health, and the `status` / `tree` views."""
