"""Go text/template engine for Orkestra Katalogs, compiled to sandboxed Jinja2.

Pure. No I/O. See `engine.GoTemplateEngine`.
"""

from .engine import GoTemplateEngine
from .errors import GoTemplateError

__all__ = ["GoTemplateEngine", "GoTemplateError"]
