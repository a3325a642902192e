"""``python -m zero2fp32 CKPT_DIR OUT_DIR [options]``: zero2fp32-mpi's command line (README
"Usage"), run by the library in this process alone. For many ranks, run zero2fp32-mpi under
mpirun or srun: a conversion started this way under a launcher would be one process per rank
each writing every file, so it is refused."""

import os
import sys

from zero2fp32 import _native

# What the MPI launchers tell each process about how many they started: mpirun (OpenMPI),
# Hydra (PMI), PMIx, and srun (a step's tasks; a batch script is not a step).
_WORLD_SIZES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS")


def _launched_ranks() -> int:
    sizes = [os.environ.get(name, "") for name in _WORLD_SIZES]
    return max([int(size) for size in sizes if size.isdigit()] + [1])


def main() -> int:
    ranks = _launched_ranks()
    if ranks > 1:
        print(f"python -m zero2fp32: started as one of {ranks} processes; it converts in one "
              "process. For many, run zero2fp32-mpi under the launcher "
              "(mpirun -n N zero2fp32-mpi ..., srun zero2fp32-mpi ...)", file=sys.stderr)
        return 2
    return _native.run_command_line(["zero2fp32"] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
