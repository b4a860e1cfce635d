"""The one client of the API server: connection settings, credentials, HTTP, proxies."""
