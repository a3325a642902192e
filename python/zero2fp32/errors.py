"""The exceptions of zero2fp32: one class per kind of the library's errors.

Every error the library reports is a ``zero2fp32.Error`` whose ``kind`` names what went wrong
(the library's ErrorKind) and whose message names the file involved and what was expected.
Each kind's class also derives from the built-in exception that callers of DeepSpeed's
functions already catch for it (a malformed checkpoint is a ``ValueError``, an unsupported
one a ``NotImplementedError``, a failed system call an ``OSError``), and an interrupted run is
a ``KeyboardInterrupt``.
"""

from __future__ import annotations


class Error(Exception):
    """An error of the zero2fp32 library; ``kind`` says which."""

    kind = "internal"


class InputError(Error, ValueError):
    """The checkpoint is malformed: truncated, corrupt (a failed CRC-32) or inconsistent."""

    kind = "input"


class UnsupportedError(Error, NotImplementedError):
    """The checkpoint is well-formed but of a kind the library refuses."""

    kind = "unsupported"


class IoError(Error, OSError):
    """A system call failed."""

    kind = "io"


class UsageError(Error, ValueError):
    """The options are wrong or contradict each other."""

    kind = "usage"


class OutputError(Error, OSError):
    """The output directory is not in a state the converter can write to."""

    kind = "output"


class Interrupted(Error, KeyboardInterrupt):
    """A termination signal (Ctrl-C, SIGTERM) stopped the run."""

    kind = "interrupted"


class InternalError(Error, RuntimeError):
    """A broken invariant: a bug in zero2fp32."""

    kind = "internal"


_BY_KIND = {cls.kind: cls for cls in (InputError, UnsupportedError, IoError, UsageError,
                                      OutputError, Interrupted, InternalError)}


def error_for_kind(kind: str, message: str) -> Error:
    """The exception for an error of the library (the extension raises what this returns)."""
    return _BY_KIND.get(kind, InternalError)(message)
