"""The one client of the API server: connection settings, HTTP, retry, discovery, the
live view and watch streams."""
