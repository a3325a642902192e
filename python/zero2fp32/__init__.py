"""zero2fp32: DeepSpeed ZeRO checkpoints consolidated by the zero2fp32-mpi converter's library.

DeepSpeed's zero_to_fp32 functions, same names, signatures, defaults and results
(drop_in.py)::

    from zero2fp32 import get_fp32_state_dict_from_zero_checkpoint

    state_dict = get_fp32_state_dict_from_zero_checkpoint(checkpoint_dir)

read in parallel threads straight into the tensors' memory (the Adam moments are never
read), every input record CRC-checked. The converter itself: ``convert(ckpt, out, **options)``
and ``plan(ckpt, **options)`` (converter.py), with the command line's options; and
``python -m zero2fp32`` is its command line, in one process. Errors are ``zero2fp32.Error``
(errors.py).
"""

from zero2fp32 import _native
from zero2fp32.converter import FileReport, Plan, PlannedTensor, Result, convert, plan
from zero2fp32.errors import (Error, InputError, InternalError, Interrupted, IoError,
                              OutputError, UnsupportedError, UsageError)
from zero2fp32.state_dict import Checkpoint, LazyTensor
from zero2fp32.drop_in import (convert_zero_checkpoint_to_fp32_state_dict,
                               get_fp32_state_dict_from_zero_checkpoint,
                               load_state_dict_from_zero_checkpoint, to_torch_tensor)

__version__ = _native.version

__all__ = [
    "Checkpoint", "Error", "FileReport", "InputError", "InternalError", "Interrupted", "IoError",
    "LazyTensor", "OutputError", "Plan", "PlannedTensor", "Result", "UnsupportedError",
    "UsageError", "convert", "convert_zero_checkpoint_to_fp32_state_dict",
    "get_fp32_state_dict_from_zero_checkpoint", "load_state_dict_from_zero_checkpoint", "plan",
    "to_torch_tensor",
]
