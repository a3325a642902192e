"""State dicts read straight into torch tensors.

A ``Checkpoint`` opens a checkpoint once (its metadata: zip directories and pickles, never the
Adam moments) and reads its consolidated tensors on demand. The memory is torch's: each tensor
is allocated here with ``torch.empty`` and the extension's threads read the checkpoint straight
into it (CRC-checked; converted to the output dtype on the way), so a state dict costs its
tensors plus the reader's I/O buffer. Tied aliases are the same tensor object as their owner.

``read_all()`` reads every tensor in one go, in parallel; ``lazy()`` returns ``LazyTensor``
placeholders whose ``contiguous()`` reads just that tensor.
"""

from __future__ import annotations

import os
from collections import OrderedDict
from typing import Any, Iterable, Optional

from zero2fp32 import _native
from zero2fp32.options import cli_arguments

# Options that shape the tensors or how they are read; the rest only shape files.
READ_OPTIONS = {"tag", "from_universal", "dtype", "parity", "cast_all_buffers",
                "keep_frozen_dtype", "stage1_frozen", "exclude_frozen_parameters", "untie",
                "include", "exclude", "strip_prefix", "tp_rules", "tp_replicated",
                "strip_vocab_padding", "read_mode", "buffer_size", "block_size",
                "input_crc"}


def _torch():
    import torch  # only the functions that make tensors need it

    return torch


class LazyTensor:
    """A tensor of the checkpoint not read yet, as DeepSpeed's lazy state dicts hold them:
    ``shape``, ``dtype``, and ``contiguous()``, which reads this tensor alone into a new one."""

    __slots__ = ("_checkpoint", "_index", "name", "shape", "dtype")

    def __init__(self, checkpoint: "Checkpoint", index: int):
        entry = checkpoint.entries[index]
        self._checkpoint = checkpoint
        self._index = index
        self.name = entry["name"]
        self.shape = checkpoint.shape(index)
        self.dtype = checkpoint.dtype(index)

    def contiguous(self):
        # Memory the tensors read before freed goes back to the kernel first: a lazy state
        # dict holds one tensor at a time, not one and the heap's leftovers.
        _native.release_free_memory()
        return self._checkpoint.read([self._index])[0]

    def numel(self) -> int:
        return self.shape.numel()

    def size(self, dim: Optional[int] = None):
        return self.shape if dim is None else self.shape[dim]

    def dim(self) -> int:
        return len(self.shape)

    def element_size(self) -> int:
        return _torch().empty((), dtype=self.dtype).element_size()

    def __repr__(self) -> str:
        return f"LazyTensor({self.name!r}, shape={tuple(self.shape)}, dtype={self.dtype})"


class Checkpoint:
    """A checkpoint opened for reading its consolidated tensors (zero2fp32/state_dict.hpp).

    ``options`` are the converter's that shape tensors (README "Options"): ``tag``, ``dtype``,
    ``include``, ``exclude``, ``strip_prefix``, ``parity``, ``cast_all_buffers``, ...;
    ``threads`` share the reads (default: one per core, at most 8).
    """

    def __init__(self, checkpoint_dir: "os.PathLike | str", *, threads: Optional[int] = None,
                 function: str = "Checkpoint", **options: Any):
        for name in options:
            if name not in READ_OPTIONS:
                raise TypeError(f"{function}() got an unexpected keyword argument '{name}'")
        arguments = [os.fspath(checkpoint_dir), "-"] + cli_arguments(function, options)
        self._reader = _native.Reader(arguments, threads or 0)
        self.plan = self._reader.plan()
        self.entries = self.plan["tensors"]
        self._index_of = {entry["name"]: i for i, entry in enumerate(self.entries)}
        self._read_dtype = [entry["dtype"] for entry in self.entries]

    def keep_16bit_masters(self) -> None:
        """Trainable tensors stored in a 16-bit dtype (DeepSpeed's low-precision masters, no
        fp32 copy) are read in it, as DeepSpeed's state dict holds them, not in the output
        dtype."""
        for index, entry in enumerate(self.entries):
            if entry["role"] in ("trainable", "alias") and \
                    entry["source_dtype"] in ("bfloat16", "float16"):
                self._read_dtype[index] = entry["source_dtype"]

    @property
    def threads(self) -> int:
        return self._reader.threads

    @property
    def warnings(self) -> list:
        return list(self.plan["warnings"])

    def shape(self, index: int):
        return _torch().Size(self.entries[index]["shape"])

    def dtype(self, index: int):
        name = self._read_dtype[index]
        dtype = getattr(_torch(), name, None)
        if dtype is None:
            raise TypeError(f"tensor '{self.entries[index]['name']}' is {name}, which this "
                            "torch has no dtype for")
        return dtype

    def shares_memory(self, index: int) -> bool:
        """A tied alias that is its owner's tensor (not one of its own: ``untie``)."""
        entry = self.entries[index]
        return entry["alias_of"] is not None and not entry["has_data"]

    def owner(self, index: int) -> int:
        return self._index_of[self.entries[index]["alias_of"]]

    def empty(self, index: int):
        return _torch().empty(self.shape(index), dtype=self.dtype(index))

    def read(self, indices: Iterable[int]) -> list:
        """New tensors holding tensors ``indices`` (none of them an alias sharing memory),
        read in parallel."""
        tensors = []
        items = []
        for index in indices:
            tensor = self.empty(index)  # contiguous, alive until read() returns
            tensors.append(tensor)
            if self.entries[index]["has_data"]:
                dtype = self._read_dtype[index]
                items.append((index, tensor.data_ptr(), tensor.numel() * tensor.element_size(),
                              None if dtype == self.entries[index]["dtype"] else dtype))
        self._reader.read(items)
        return tensors

    def _assemble(self, values: dict, into: dict) -> dict:
        """`into` filled in state-dict order: each tensor's value, each alias its owner's."""
        for index, entry in enumerate(self.entries):
            value = values[self.owner(index)] if self.shares_memory(index) else values[index]
            into[entry["name"]] = value
        return into

    def read_all(self) -> dict:
        """Every tensor, read at once; a dict in state-dict order."""
        owners = [i for i in range(len(self.entries)) if not self.shares_memory(i)]
        return self._assemble(dict(zip(owners, self.read(owners))), {})

    def lazy(self) -> "OrderedDict[str, LazyTensor]":
        """Every tensor as a LazyTensor, in state-dict order (aliases: their owner's object)."""
        values = {i: LazyTensor(self, i) for i in range(len(self.entries))
                  if not self.shares_memory(i)}
        return self._assemble(values, OrderedDict())


def materialize(state_dict: dict, return_empty_tensor: bool = False) -> dict:
    """DeepSpeed's to_torch_tensor: every value as a torch tensor, values that were one object
    still one object. LazyTensors of one Checkpoint are read together, in parallel."""
    first_name = {}  # id(value) -> the first name holding it
    pending = {}  # Checkpoint -> [(name, LazyTensor)] to read in one go
    for name, value in state_dict.items():
        if id(value) in first_name:
            continue
        first_name[id(value)] = name
        if isinstance(value, LazyTensor) and not return_empty_tensor:
            pending.setdefault(value._checkpoint, []).append((name, value))
    made = {}
    for checkpoint, lazies in pending.items():
        tensors = checkpoint.read([lazy._index for _, lazy in lazies])
        made.update((name, tensor) for (name, _), tensor in zip(lazies, tensors))
    torch_state_dict = {}
    for name, value in state_dict.items():
        owner = first_name[id(value)]
        if owner != name:
            torch_state_dict[name] = torch_state_dict[owner]
        elif name in made:
            torch_state_dict[name] = made[name]
        elif return_empty_tensor:
            torch_state_dict[name] = _torch().empty(value.shape, dtype=value.dtype)
        else:
            torch_state_dict[name] = value.contiguous()
    return torch_state_dict
