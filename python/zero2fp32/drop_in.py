"""Drop-in replacements for DeepSpeed's ``deepspeed.utils.zero_to_fp32`` functions::

    from zero2fp32 import get_fp32_state_dict_from_zero_checkpoint

Same names, positional parameters, defaults and results as DeepSpeed's: on every checkpoint
DeepSpeed's functions read, the same keys in the same order, dtypes, shapes and values, tied
parameters one tensor object under both names; and a correct result where DeepSpeed's fail
(BF16_Optimizer, tied weights with safetensors, tensor/pipeline/expert parallel, universal
checkpoints). By default the tensors are DeepSpeed's, quirks included: every buffer becomes
float32 (integer ones too), frozen parameters keep their stored 16-bit dtype, ZeRO-1 frozen
parameters are left out. ``parity=False`` gives the converter's fixes instead (integer buffers
keep their dtype, frozen parameters get the output dtype, ZeRO-1 frozen parameters are kept),
and each of the three has its own keyword (``cast_all_buffers``, ``keep_frozen_dtype``,
``stage1_frozen``). Other keyword-only options: ``dtype`` ("fp32", "bf16", "fp16" or a
torch.dtype), ``include``/``exclude`` (regexes), ``strip_prefix``, ``threads``, and the rest of
the converter's options that shape tensors (state_dict.READ_OPTIONS; README "Options").

The module zero2fp32.zero_to_fp32 offers them under DeepSpeed's module name, with
zero_to_fp32.py's command line.
"""

from __future__ import annotations

import logging
from typing import Any, Optional

from zero2fp32.converter import convert
from zero2fp32.state_dict import Checkpoint, materialize

logger = logging.getLogger("zero2fp32")


def _tensor_options(parity: bool, options: dict) -> dict:
    """DeepSpeed's tensors (parity) or the converter's, each part overridable."""
    chosen = dict(options)
    for name, value in (("cast_all_buffers", parity), ("keep_frozen_dtype", parity),
                        ("stage1_frozen", "skip" if parity else "emit")):
        if chosen.get(name) is None:
            chosen[name] = value
    return chosen


def get_fp32_state_dict_from_zero_checkpoint(checkpoint_dir, tag=None,
                                             exclude_frozen_parameters=False, lazy_mode=False,
                                             *, parity: bool = True, dtype=None, include=None,
                                             exclude=None, strip_prefix=None,
                                             threads: Optional[int] = None,
                                             keep_master_dtype: Optional[bool] = None,
                                             **options: Any):
    """The consolidated fp32 state dict of a ZeRO checkpoint, as DeepSpeed's function returns
    it: a dict of torch tensors in state-dict order (buffers, frozen parameters, trainable
    parameters, tied aliases); with ``lazy_mode=True`` an OrderedDict of LazyTensor, each read
    (alone) by its ``contiguous()``.

    ``checkpoint_dir`` holds ``latest`` (or give ``tag``), or is the tag folder itself. The
    tensors are read in parallel threads straight into their memory, every input record
    checked against its CRC-32. ``keep_master_dtype`` (default: ``parity`` when no ``dtype``
    is given): trainable parameters whose masters are stored 16-bit (DeepSpeed's
    low-precision masters) stay in that dtype, as DeepSpeed returns them.
    """
    checkpoint = Checkpoint(checkpoint_dir, threads=threads,
                            function="get_fp32_state_dict_from_zero_checkpoint",
                            **_tensor_options(parity, dict(
                                options, tag=tag, dtype=dtype, include=include, exclude=exclude,
                                strip_prefix=strip_prefix,
                                exclude_frozen_parameters=exclude_frozen_parameters)))
    for warning in checkpoint.warnings:
        logger.warning(warning)
    if keep_master_dtype is None:
        keep_master_dtype = parity and dtype is None
    if keep_master_dtype:
        checkpoint.keep_16bit_masters()
    return checkpoint.lazy() if lazy_mode else checkpoint.read_all()


def to_torch_tensor(state_dict, return_empty_tensor=False):
    """Every value of a (lazy) state dict as a torch tensor, shared values still shared: lazy
    tensors are read (those of one checkpoint together, in parallel), or with
    ``return_empty_tensor=True`` replaced by empty tensors of their shape and dtype."""
    return materialize(state_dict, return_empty_tensor)


def convert_zero_checkpoint_to_fp32_state_dict(checkpoint_dir, output_dir, max_shard_size="5GB",
                                               safe_serialization=False, tag=None,
                                               exclude_frozen_parameters=False, *,
                                               parity: bool = True, dtype=None, include=None,
                                               exclude=None, strip_prefix=None, **options: Any):
    """Writes the consolidated state dict into ``output_dir`` as DeepSpeed's function does:
    ``pytorch_model.bin`` (``model.safetensors`` with ``safe_serialization``), sharded by
    ``max_shard_size`` (None: one file) with Hugging Face's names and index. Output files
    already there are replaced. Tied weights with safetensors, which DeepSpeed cannot write,
    are written once with the alias recorded in the metadata. Other converter options (README
    "Options": ``untie``, ``buffer_size``, ``copy_hf_files``, ...) may be given too."""
    chosen = dict(options)
    chosen.setdefault("overwrite", True)
    chosen.setdefault("copy_hf_files", False)
    chosen = _tensor_options(parity, dict(
        chosen, format="safetensors" if safe_serialization else "torch",
        max_shard_size=max_shard_size, tag=tag, dtype=dtype, include=include, exclude=exclude,
        strip_prefix=strip_prefix, exclude_frozen_parameters=exclude_frozen_parameters))
    convert(checkpoint_dir, output_dir, **chosen)


def load_state_dict_from_zero_checkpoint(model, checkpoint_dir, tag=None, **options: Any):
    """Moves ``model`` to the CPU, loads the checkpoint's consolidated fp32 weights into it
    (``load_state_dict(strict=False)``) and returns it, as DeepSpeed's function does. Keyword
    options as get_fp32_state_dict_from_zero_checkpoint's."""
    logger.info("Extracting fp32 weights")
    state_dict = get_fp32_state_dict_from_zero_checkpoint(checkpoint_dir, tag, **options)
    logger.info("Overwriting model with fp32 weights")
    model = model.cpu()
    model.load_state_dict(state_dict, strict=False)
    return model
