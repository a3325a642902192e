"""DeepSpeed's ``deepspeed.utils.zero_to_fp32`` module, by zero2fp32: its four functions
(drop_in.py) under the same module name, and its command line::

    zero_to_fp32 CHECKPOINT_DIR OUTPUT_DIR [--max_shard_size 5GB] [--safe_serialization]
                 [-t TAG] [--exclude_frozen_parameters] [-d]
    python -m zero2fp32.zero_to_fp32 ...            (the same)

with the same arguments and the same files as DeepSpeed's script (README "From Python").
"""

from __future__ import annotations

import argparse
import logging
import sys

from zero2fp32.drop_in import (convert_zero_checkpoint_to_fp32_state_dict,
                               get_fp32_state_dict_from_zero_checkpoint,
                               load_state_dict_from_zero_checkpoint, to_torch_tensor)
from zero2fp32.errors import Error

__all__ = ["convert_zero_checkpoint_to_fp32_state_dict", "get_fp32_state_dict_from_zero_checkpoint",
           "load_state_dict_from_zero_checkpoint", "main", "to_torch_tensor"]

_EXIT_CODES = {"usage": 2, "interrupted": 3}


def main(argv=None) -> int:
    """zero_to_fp32.py's command line: the same arguments, the same files."""
    parser = argparse.ArgumentParser(
        prog="zero_to_fp32",
        description="Consolidates a DeepSpeed ZeRO checkpoint into fp32 weights (zero2fp32).")
    parser.add_argument("checkpoint_dir", type=str,
                        help="path to the desired checkpoint folder, e.g., path/checkpoint-12")
    parser.add_argument("output_dir", type=str,
                        help="directory for the fp32 state dict files, e.g. path/checkpoint-12-output/")
    parser.add_argument("--max_shard_size", type=str, default="5GB",
                        help="largest shard before the output is sharded (5GB, 500MB, ...)")
    parser.add_argument("--safe_serialization", default=False, action="store_true",
                        help="write safetensors instead of PyTorch's pickle format")
    parser.add_argument("-t", "--tag", type=str, default=None,
                        help="checkpoint tag (folder) to convert, e.g. global_step1")
    parser.add_argument("--exclude_frozen_parameters", action="store_true",
                        help="leave out frozen parameters")
    parser.add_argument("-d", "--debug", action="store_true", help="print what the run does")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.debug else logging.INFO,
                        format="%(message)s")
    try:
        convert_zero_checkpoint_to_fp32_state_dict(
            args.checkpoint_dir, args.output_dir, max_shard_size=args.max_shard_size,
            safe_serialization=args.safe_serialization, tag=args.tag,
            exclude_frozen_parameters=args.exclude_frozen_parameters)
    except Error as error:
        print(f"zero_to_fp32: error: {error}", file=sys.stderr)
        return _EXIT_CODES.get(error.kind, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
