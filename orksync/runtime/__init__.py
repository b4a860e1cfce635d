"""Process-level helpers: logging set-up and the change formatter (`logs`), the progress
line on a terminal (`progress`), caches keyed by an argument's identity (`memo`), forked
workers for the offline load and render (`forked`), the cyclic collector paused around the
batch stages (`gcpause`)."""
