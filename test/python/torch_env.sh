#!/usr/bin/env bash
# The Python tests' torch environment: where python3 has no torch, a venv at ENV_DIR with
# $CACHESTORE_TEST_TORCH (default torch==2.10.*, the oldest torch the native ops target),
# scikit-build-core and pytest from the package index, kept while complete. Exits 0 when ENV_DIR
# holds that environment, 1 when none is wanted (python3 has torch, CACHESTORE_TEST_TORCH=none,
# or SOURCE_DIR/.whl: a machine without network) or none could be had (the torch tests skip).
#
# usage: torch_env.sh SOURCE_DIR ENV_DIR
set -uo pipefail
src=$1
env_dir=$2
torch_req=${CACHESTORE_TEST_TORCH:-torch==2.10.*}
if python3 -c "import torch" 2>/dev/null || [[ "$torch_req" == none || -d "$src/.whl" ]]; then
  exit 1
fi
"$env_dir/bin/python" -c "import torch, pytest, scikit_build_core" 2>/dev/null && exit 0
rm -rf "$env_dir"
start=$SECONDS
if python3 -m venv "$env_dir" &&
   "$env_dir/bin/python" -m pip install -q --disable-pip-version-check --no-warn-script-location \
     "$torch_req" scikit-build-core pytest; then
  echo "torch environment ($torch_req): $((SECONDS - start)) s"
  exit 0
fi
echo "could not install $torch_req (no package index?): the torch tests skip"
rm -rf "$env_dir"
exit 1
