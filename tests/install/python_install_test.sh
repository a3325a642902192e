#!/usr/bin/env bash
# The Python package installed the two ways README.md "From Python" shows, each into a fresh
# virtual environment that sees Debian's torch (--system-site-packages), then imported and used
# from a directory outside the source tree:
#   (1) `cmake --install BUILD --prefix VENV`: the package goes where VENV's Python imports from,
#       and VENV/bin/zero_to_fp32 runs;
#   (2) `pip install --no-build-isolation --no-index` of a copy of the source tree, reusing this
#       build (Z2F_CMAKE_BUILD_DIR, setup.py): the wheel, its zero_to_fp32 entry point.
# Each: a state dict equal to the fixture's expected.pt, an HDF5 conversion (the library's
# module found inside the package), the package imported from the environment, not the build.
#
# Environment: Z2F_BUILD_DIR (a Release build with the package), Z2F_SOURCE_DIR, Z2F_PYTHON.
set -euo pipefail

work=$(mktemp -d "${TMPDIR:-/tmp}/z2f-python-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
fixture="$Z2F_SOURCE_DIR/tests/data/deepspeed/z3_ws2_tied_fp32"
unset PYTHONPATH

# Imports the package with the environment's Python, from elsewhere, and uses it.
check_environment() {
    local venv=$1 label=$2
    (cd "$work" && "$venv/bin/python" - "$venv" "$fixture" "$work/$label-out") <<'PY' \
        || fail "$label: the installed package does not work"
import os, sys
import torch
import zero2fp32
venv, fixture, out = sys.argv[1:]
where = os.path.realpath(zero2fp32.__file__)
assert where.startswith(os.path.realpath(venv) + os.sep), where
expected = torch.load(os.path.join(fixture, "expected.pt"))["state_dict"]
ours = zero2fp32.get_fp32_state_dict_from_zero_checkpoint(fixture, parity=False)
assert sorted(ours) == sorted(expected)
assert all(torch.equal(ours[k], v) and ours[k].dtype == v.dtype for k, v in expected.items())
assert ours["lm_head.weight"] is ours["embed.weight"]
zero2fp32.convert(fixture, out, format="hdf5")
assert os.path.getsize(os.path.join(out, "model.h5")) > 0
print("ok", where)
PY
    "$venv/bin/zero_to_fp32" "$fixture" "$work/$label-z2f" >/dev/null 2>&1 \
        || fail "$label: zero_to_fp32 failed"
    [[ -s "$work/$label-z2f/pytorch_model.bin" ]] || fail "$label: zero_to_fp32 wrote no pytorch_model.bin"
}

echo "--- cmake --install into a virtual environment"
"$Z2F_PYTHON" -m venv --system-site-packages --without-pip "$work/cmake-venv"
cmake --install "$Z2F_BUILD_DIR" --prefix "$work/cmake-venv" >"$work/install.log" \
    || fail "cmake --install: $(tail -5 "$work/install.log")"
check_environment "$work/cmake-venv" cmake

echo "--- pip install of a copy of the source tree"
mkdir "$work/source"
tar -C "$Z2F_SOURCE_DIR" --exclude=./build --exclude=./.git -cf - . | tar -C "$work/source" -xf -
"$Z2F_PYTHON" -m venv --system-site-packages --without-pip "$work/pip-venv"
# Debian's pip (python3-pip), run by the environment's Python, installs into the environment.
Z2F_CMAKE_BUILD_DIR="$Z2F_BUILD_DIR" "$work/pip-venv/bin/python" -m pip install \
    --no-build-isolation --no-index --no-deps "$work/source" >"$work/pip.log" 2>&1 \
    || fail "pip install: $(tail -20 "$work/pip.log")"
check_environment "$work/pip-venv" pip
echo "python package installed both ways: ok"
