"""Tests of the render of a repository: builders, conditions, preparation, field checks, live,
nested and external renders, the rendered directory."""
