#!/usr/bin/env bash
# The Python package as a user gets it: `pip install <source tree>` (scikit-build-core drives the
# project's CMake) into a scratch target folder, then pytest on test/python against that
# installed package, from outside the tree. The interpreter's own packages (PyTorch, pytest)
# stay visible. With <source>/.whl present (a machine without network: the build backend carried
# as a wheel) pip installs from there only and builds without isolation.
#
# usage: run_wheel_tests.sh SOURCE_DIR WORK_DIR [PYTEST_ARGS...]   (package in WORK_DIR/site)
set -euo pipefail
src=$(cd "$1" && pwd)
work=$2
shift 2
rm -rf "$work"
mkdir -p "$work/site" "$work/tools"
export PYTHONPATH="$work/site:$work/tools${PYTHONPATH:+:$PYTHONPATH}"
pip_opts=(-q --disable-pip-version-check --no-warn-script-location)
build_opts=()
if [[ -d "$src/.whl" ]]; then
  pip_opts+=(--no-index --find-links "$src/.whl")
  python3 -c "import scikit_build_core" 2>/dev/null ||
    python3 -m pip install "${pip_opts[@]}" --target "$work/tools" scikit-build-core
  build_opts=(--no-build-isolation)
fi
python3 -c "import pytest" 2>/dev/null ||
  python3 -m pip install "${pip_opts[@]}" --target "$work/tools" pytest
start=$SECONDS
python3 -m pip install "${pip_opts[@]}" "${build_opts[@]}" --no-deps --target "$work/site" "$src"
echo "pip install $src: $((SECONDS - start)) s"
cd "$work"
python3 -c "import cachestore; print('installed', cachestore.__version__, cachestore.library_path())"
exec python3 -m pytest -q -p no:cacheprovider -p no:logging -rs "$@" "$src/test/python"
