"""The converter from Python: convert() is ``zero2fp32-mpi CKPT_DIR OUT_DIR [options]`` in this
process, plan() the C++ library's plan_conversion; options as in options.py.

Messages of a run (warnings, main steps, verbose notes) go to the ``zero2fp32`` logger.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Any, Optional

from zero2fp32 import _native
from zero2fp32.options import cli_arguments

logger = logging.getLogger("zero2fp32")

_LEVELS = {"warning": logging.WARNING, "info": logging.INFO, "verbose": logging.DEBUG}


@dataclass(frozen=True)
class PlannedTensor:
    name: str
    dtype: str  # as written, torch's name: float32, bfloat16, int64, ...
    source_dtype: str  # as stored in the checkpoint
    shape: tuple
    role: str  # buffer, frozen, trainable or alias
    alias_of: Optional[str]  # a tied alias: the tensor whose bytes it shares
    file: str  # the output file that holds its data
    other_files: list = field(default_factory=list)
    merge: str = ""  # parallel checkpoints: how it is merged


@dataclass(frozen=True)
class Plan:
    """What a conversion writes: the checkpoint's facts, the files, every tensor in state-dict
    order (zero2fp32/plan.hpp)."""

    checkpoint: str  # the tag folder
    tag: str
    zero_stage: int
    world_size: int
    ds_version: str
    format: str
    files: list  # (name, size) pairs
    index: Optional[str]
    tensors: list  # PlannedTensor, in state-dict order
    warnings: list
    parallel: Optional[dict]  # tensor-, pipeline- or expert-parallel checkpoints: the grid

    @classmethod
    def from_dict(cls, values: dict) -> "Plan":
        values = dict(values)
        values["tensors"] = [PlannedTensor(**{k: v for k, v in tensor.items() if k != "has_data"})
                             for tensor in values["tensors"]]
        return cls(**values)


@dataclass(frozen=True)
class FileReport:
    name: str
    size: int
    ranks: list
    kept: bool  # complete from an earlier run (resume), not written again
    complete: bool  # on disk under its final name
    check: str  # verify: intact, differs, truncated, too long or missing


@dataclass(frozen=True)
class Result:
    """What a conversion did (zero2fp32/result.hpp)."""

    plan: Plan
    files: list  # FileReport, parallel to plan.files
    existing: list  # (name, action) of output-like files found in the output directory
    dry_run: bool
    executed: bool
    verify_only: bool
    verified: bool
    output_bytes: int
    bytes_read: int
    bytes_written: int
    peak_rss_bytes: int
    wall_seconds: float
    phase_seconds: list
    warnings: list
    index_written: bool
    refusal: str

    @classmethod
    def from_dict(cls, values: dict) -> "Result":
        values = dict(values)
        values["plan"] = Plan.from_dict(values["plan"])
        values["files"] = [FileReport(**report) for report in values["files"]]
        return cls(**values)


def log_message(level: str, text: str) -> None:
    logger.log(_LEVELS.get(level, logging.INFO), text)


def convert(checkpoint_dir: "os.PathLike | str", output_dir: "os.PathLike | str",
            **options: Any) -> Result:
    """Converts the checkpoint into ``output_dir`` as ``zero2fp32-mpi`` does, in this process.

    ``options`` are the command line's (README "Options") with underscores:
    ``convert(ckpt, out, dtype="bf16", max_shard_size="10GB", strip_prefix="_orig_mod.")``.
    Raises zero2fp32.Error (its ``kind`` says which) when the conversion fails.
    """
    arguments = [os.fspath(checkpoint_dir), os.fspath(output_dir)]
    arguments += cli_arguments("convert", options)
    return Result.from_dict(_native.convert(arguments, log_message))


def plan(checkpoint_dir: "os.PathLike | str", **options: Any) -> Plan:
    """What convert() would write with these options: reads the checkpoint's metadata only."""
    arguments = [os.fspath(checkpoint_dir), "-"] + cli_arguments("plan", options)
    return Plan.from_dict(_native.plan(arguments))
