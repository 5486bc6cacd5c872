"""pip install . -- the build behind pyproject.toml (PEP 517, setuptools backend: Debian's python3-setuptools).
It builds the C libraries, the programs and the extension with CMake (no network, no build isolation
needed) and packages them as mooncake/ (extension), mooncake/lib (libmooncake_*.so) and mooncake/bin (the
programs, on PATH through the console scripts of pyproject.toml). docs/packaging.md, "pip".

Environment: MC_BUILD_DIR=<an existing CMake build> reuses it instead of building (it must have been
built for the same Python); MC_BUILD_JOBS (default 2) sets the parallelism of a fresh build."""

import glob
import os
import re
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
WORK = os.path.join(ROOT, "build", "pip-setuptools")
# The version integrations read with importlib.metadata.version("mooncake-transfer-engine") and compare
# with upstream's releases (e.g. `>= 0.3.10.post1` before calling batch_remove(force=True)): the upstream
# release whose Python API our contract covers, then our own version as a PEP 440 local label, so it orders
# after that release and before upstream's next one: 0.3.12.post1+c.0.1.0 (docs/packaging.md, "Version").
# Raise UPSTREAM_API when the package answers to a later upstream release.
UPSTREAM_API = "0.3.12.post1"
with open(os.path.join(ROOT, "include", "mooncake", "version.h")) as f: # the one place our version is written
    OWN_VERSION = re.search(r'#define MOONCAKE_VERSION_STRING "([0-9.]+)"', f.read()).group(1)
VERSION = "%s+c.%s" % (UPSTREAM_API, OWN_VERSION)
# the programs of mooncake/bin; pyproject.toml's [project.scripts] runs them through mooncake/cli.py
BINARIES = ["mooncake_master", "mooncake_http_metadata_server", "transfer_engine_bench", "mooncake",
            "mooncake_store_node", "mooncake_client", "mooncake_p2p"]


class CMakeBuild(build_ext):
    def run(self):
        build = os.environ.get("MC_BUILD_DIR")
        if not build:
            build = os.path.join(ROOT, "build", "pip")
            subprocess.check_call(["cmake", "-S", ROOT, "-B", build, "-DCMAKE_BUILD_TYPE=Release",
                                   "-DMC_BUILD_TESTS=OFF", "-DPython3_EXECUTABLE=" + sys.executable])
            subprocess.check_call(["cmake", "--build", build, "-j", os.environ.get("MC_BUILD_JOBS", "2")])
        stage = os.path.join(WORK, "stage")
        shutil.rmtree(stage, ignore_errors=True)
        subprocess.check_call(["cmake", "--install", build, "--prefix", stage])
        ext = glob.glob(os.path.join(stage, "lib", "python*", "*-packages", "mooncake", "_mooncake*.so"))
        if not ext:
            raise RuntimeError("the CMake build in %s has no Python extension (python3-dev missing?)" % build)
        out = self.get_ext_fullpath("mooncake._mooncake")
        pkg = os.path.dirname(out)
        os.makedirs(os.path.join(pkg, "lib"), exist_ok=True)
        os.makedirs(os.path.join(pkg, "bin"), exist_ok=True)
        shutil.copy2(ext[0], out)
        # the names the extension loads: the SONAMEs libmooncake_*.so.<major> (links to the real files)
        for lib in glob.glob(os.path.join(stage, "lib", "libmooncake_*.so.*")):
            if re.fullmatch(r"libmooncake_\w+\.so\.\d+", os.path.basename(lib)):
                shutil.copy2(lib, os.path.join(pkg, "lib"))
        for name in BINARIES:
            shutil.copy2(os.path.join(stage, "bin", name), os.path.join(pkg, "bin", name))


os.makedirs(WORK, exist_ok=True)
setup(  # name, description, console scripts: pyproject.toml
    version=VERSION,
    package_dir={"": "python"},
    packages=["mooncake"],
    ext_modules=[Extension("mooncake._mooncake", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": WORK}, "egg_info": {"egg_base": WORK}},
    zip_safe=False,
)
