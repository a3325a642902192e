"""Keyword options as zero2fp32-mpi's command-line arguments.

The extension parses them with the command line's own parser, so an option means in Python
exactly what it means in a shell (README "Options"), its checks and contradictions included;
a message about a bad value names the command-line option (``--dtype``). Names are the
command line's long names with underscores: ``max_shard_size``, ``strip_prefix``,
``read_mode``, ... A switch that is on by default is turned off with False (``input_crc``,
``copy_hf_files``, ``space_check``).
"""

from __future__ import annotations

import os
from typing import Any, Iterable

# Options that take a value, by keyword.
_VALUES = {
    "tag": "--tag",
    "format": "--format",
    "dtype": "--dtype",
    "max_shard_size": "--max-shard-size",
    "stage1_frozen": "--stage1-frozen",
    "hdf5_bf16": "--hdf5-bf16",
    "tp_rules": "--tp-rules",
    "tp_replicated": "--tp-replicated",
    "io": "--io",
    "read_mode": "--read-mode",
    "buffer_size": "--buffer-size",
    "block_size": "--block-size",
}
# Options that may be given several times (a string or an iterable of strings).
_LISTS = {"include": "--include", "exclude": "--exclude", "strip_prefix": "--strip-prefix"}
# Switches, off by default.
_SWITCHES = {
    "from_universal": "--from-universal",
    "parity": "--parity",
    "cast_all_buffers": "--cast-all-buffers",
    "keep_frozen_dtype": "--keep-frozen-dtype",
    "exclude_frozen_parameters": "--exclude_frozen_parameters",
    "untie": "--untie",
    "strip_vocab_padding": "--strip-vocab-padding",
    "overwrite": "--overwrite",
    "resume": "--resume",
    "dry_run": "--dry-run",
    "verify": "--verify",
}
# Switches that are on by default: False gives the option.
_ON_BY_DEFAULT = {
    "copy_hf_files": "--no-copy-hf-files",
    "input_crc": "--no-input-crc",
    "space_check": "--no-space-check",
}

# torch's names of the output dtypes, and their aliases, as --dtype names them.
_DTYPES = {"float32": "fp32", "float": "fp32", "bfloat16": "bf16", "float16": "fp16",
           "half": "fp16"}

KNOWN = set(_VALUES) | set(_LISTS) | set(_SWITCHES) | set(_ON_BY_DEFAULT)


def _dtype_name(value: Any) -> str:
    """fp32, bf16 or fp16 from those names, torch's names, or a torch.dtype."""
    text = str(value)
    if text.startswith("torch."):
        text = text[len("torch."):]
    return _DTYPES.get(text, text)


def _value_text(name: str, value: Any) -> str:
    if name == "dtype":
        return _dtype_name(value)
    if name == "max_shard_size" and value is None:
        return "none"
    if isinstance(value, bool):
        raise TypeError(f"{name} takes a value, not {value}")
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def _strings(name: str, value: Any) -> list[str]:
    if isinstance(value, (str, os.PathLike)):
        return [os.fspath(value)]
    if not isinstance(value, Iterable):
        raise TypeError(f"{name} takes a string or a list of strings, not {value!r}")
    return [str(item) for item in value]


def cli_arguments(function: str, options: dict[str, Any]) -> list[str]:
    """The command-line arguments for `options`; an unknown keyword is a TypeError that names
    `function`, as Python reports one. None means "not given" (except max_shard_size=None: one
    file)."""
    arguments: list[str] = []
    for name, value in options.items():
        if name not in KNOWN:
            raise TypeError(f"{function}() got an unexpected keyword argument '{name}'")
        if value is None and name != "max_shard_size":
            continue
        if name in _VALUES:
            arguments += [_VALUES[name], _value_text(name, value)]
        elif name in _LISTS:
            for item in _strings(name, value):
                arguments += [_LISTS[name], item]
        elif name in _SWITCHES:
            if value:
                arguments.append(_SWITCHES[name])
        elif not value:
            arguments.append(_ON_BY_DEFAULT[name])
    return arguments
