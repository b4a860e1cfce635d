"""`python -m orksync` runs the command line."""

from orksync.cli import main

raise SystemExit(main())
