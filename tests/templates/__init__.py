"""Tests of the template languages: the Go template engine, the Jinja2 dialect, the note
library, and the differential tests against Go and Orkestra's own code."""
