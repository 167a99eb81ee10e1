#!/usr/bin/env bash
# The Python package as a user gets it: `pip install <source tree>` (scikit-build-core drives the
# project's CMake, which builds the native torch ops when the interpreter has torch >= 2.10) into
# a scratch target folder, then pytest on test/python against that installed package, from
# outside the tree. The interpreter's own packages (PyTorch, pytest) stay visible.
#
# PyTorch: if python3 has none, a scratch environment gets one from the package index
# (test/python/torch_env.sh: CACHESTORE_TEST_TORCH=<pip requirement>, default torch==2.10.*, the
# oldest torch the native ops target, or "torch" for the newest; kept in WORK_DIR.torch-env, or
# CACHESTORE_TEST_TORCH_ENV, between runs), so that the native ops' host side is built and tested
# here too;
# CACHESTORE_TEST_TORCH=none skips that (the torch tests then skip).
# The package builds without isolation against the interpreter's torch. With <source>/.whl
# present (a machine without network: the build backend carried as a wheel) pip installs from
# there only. CACHESTORE_WHEEL_CUDA_ARCHITECTURES (e.g. 90-real) builds the package for those
# architectures only, where the tests need no other image (the GPU machine: a third of the build).
# Without an NVIDIA driver no kernel of the package runs, so unless that variable says otherwise
# the package is built without kernels (CACHESTORE_HOST_ONLY: every store refuses after its
# checks, which it never reaches there, the device query failing first): the package, its
# loading and the ops' host side are what is tested there, and the kernels are the first build's
# (CI's time limit).
#
# usage: run_wheel_tests.sh SOURCE_DIR WORK_DIR [PYTEST_ARGS...]   (package in WORK_DIR/site)
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2
shift 2
rm -rf "$work"
mkdir -p "$work/site" "$work/tools"
pip_opts=(-q --disable-pip-version-check --no-warn-script-location)
[[ -d "$src/.whl" ]] && pip_opts+=(--no-index --find-links "$src/.whl")
py=python3
# CACHESTORE_TEST_TORCH_ENV: where the environment is (scripts/test fetches it during the build).
env_dir=${CACHESTORE_TEST_TORCH_ENV:-$work.torch-env}
if "$src/test/python/torch_env.sh" "$src" "$env_dir"; then
  py="$env_dir/bin/python"
fi
export PYTHONPATH="$work/site:$work/tools${PYTHONPATH:+:$PYTHONPATH}"
"$py" -c "import scikit_build_core" 2>/dev/null ||
  "$py" -m pip install "${pip_opts[@]}" --target "$work/tools" scikit-build-core
"$py" -c "import pytest" 2>/dev/null ||
  "$py" -m pip install "${pip_opts[@]}" --target "$work/tools" pytest
build_opts=()
# Its own build folder for each choice (and each torch: the native ops are built against it): a
# cached choice never reaches another build's folder.
torch_tag=torch-$("$py" -c "import torch; print(torch.__version__.split('+')[0])" 2>/dev/null ||
                  echo none)
if [[ -z "${CACHESTORE_WHEEL_CUDA_ARCHITECTURES:-}" ]] &&
   ! python3 -c "import ctypes; ctypes.CDLL('libcuda.so.1')" 2>/dev/null; then
  build_opts+=(--config-settings="cmake.define.CACHESTORE_HOST_ONLY=ON"
               --config-settings="build-dir=build-python/host-only/$torch_tag/{wheel_tag}")
  echo "no NVIDIA driver: the package is built without kernels (CACHESTORE_HOST_ONLY)"
elif [[ -n "${CACHESTORE_WHEEL_CUDA_ARCHITECTURES:-}" ]]; then
  archs=$CACHESTORE_WHEEL_CUDA_ARCHITECTURES
  build_opts+=(--config-settings="cmake.define.CMAKE_CUDA_ARCHITECTURES=$archs"
               --config-settings="build-dir=build-python/${archs//[^0-9a-z-]/_}/$torch_tag/{wheel_tag}")
fi
start=$SECONDS
"$py" -m pip install "${pip_opts[@]}" "${build_opts[@]}" --no-build-isolation --no-deps \
  --target "$work/site" "$src"
echo "pip install $src: $((SECONDS - start)) s"
cd "$work"
"$py" -c "import cachestore; print('installed', cachestore.__version__, cachestore.library_path())"
"$py" -c "import cachestore.torch as t; print('cachestore.torch:', t.backend, '-', t.backend_detail)" \
  2>/dev/null || echo "cachestore.torch: no torch in $py"
exec "$py" -m pytest -q -p no:cacheprovider -p no:logging -rs "$@" "$src/test/python"
