"""`pip install .`: the Python package zero2fp32 (python/zero2fp32) with its extension, built
by CMake from this source tree (src/python/CMakeLists.txt) and installed into the wheel's
directory by `cmake --install --component python` (cmake/python_install.cmake), so the wheel
holds exactly what `cmake --install` puts into a prefix: the sources, the extension, the
library and its HDF5 module.

Nothing is downloaded: pip install --no-build-isolation --no-index . with Debian's setuptools,
wheel, cmake, g++ and the packages of scripts/install-deps.sh. The CMake build goes to
build/python-wheel; Z2F_CMAKE_BUILD_DIR names an existing build tree to use instead (its own
configuration kept: the tests install from the Release build this way).
"""

import os
import re
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def project_version() -> str:
    text = (ROOT / "CMakeLists.txt").read_text()
    return re.search(r"project\(zero2fp32_mpi\s+VERSION\s+([0-9.]+)", text).group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        package_dir = Path(self.get_ext_fullpath(ext.name)).resolve().parent
        given = os.environ.get("Z2F_CMAKE_BUILD_DIR")
        build_dir = Path(given) if given else ROOT / "build" / "python-wheel"
        jobs = str(os.cpu_count() or 1)
        if not given:
            subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir),
                            "-DCMAKE_BUILD_TYPE=Release", "-DZ2F_BUILD_TESTS=OFF",
                            "-DZ2F_WITH_PYTHON=ON", f"-DZ2F_PYTHON={sys.executable}"],
                           check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "z2f_python", "-j", jobs],
                       check=True)
        subprocess.run(["cmake", "--install", str(build_dir), "--component", "python"],
                       check=True, env=dict(os.environ, Z2F_PYTHON_SITE_DIR=str(package_dir.parent)))


setup(
    name="zero2fp32",
    version=project_version(),
    description="DeepSpeed ZeRO checkpoints consolidated into fp32 state dicts and Hugging Face "
                "files, by the zero2fp32-mpi converter's C++ library",
    long_description="See README.md, section \"From Python\".",
    python_requires=">=3.9",
    packages=["zero2fp32"],
    package_dir={"": "python"},
    ext_modules=[Extension("zero2fp32._native", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    entry_points={"console_scripts": ["zero_to_fp32 = zero2fp32.zero_to_fp32:main"]},
    zip_safe=False,
)
