# Sourced by a run script for the device machine, from the repository root: unpacks .bundle's
# binaries into a fresh directory ($b), lays the checkout's Python over them (a bundle packed
# before a Python edit would run the old code) and exports the environment that runs them
# (PATH, PYTHONPATH, a cache of its own). bench/results/*/next*.sh: `source scripts/bundle-env.sh`.
b=$(mktemp -d)
tar -C "$b" -xJf .bundle/tessel-gpu.tar.xz
cp python/tessel/*.py "$b/python/tessel/"
export PATH=$b/bin:/usr/local/cuda/bin:$PATH PYTHONUNBUFFERED=1 PYTHONPATH=$b/python \
  TESSEL_CACHE_DIR=$b/cache
