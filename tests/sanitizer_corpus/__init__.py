"""A planted-bug corpus for the sanitizer: small pyACL programs with one known bug each, and
their fixed twins (see :mod:`.programs`)."""

from .programs import CASES, HOST, Case, expect

__all__ = ["CASES", "HOST", "Case", "expect"]
