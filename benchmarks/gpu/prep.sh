#!/usr/bin/env bash
# Run HERE (a machine with network and the training environment), before a GPU session: puts
# what the GPU machine lacks into .gpu-carry/ (git-ignored through .git/info/exclude), which
# `run` carries there (limit 64 MiB):
#   horovod-0.28.1.tar.gz      Horovod's source release (checksum as training/install pins it)
#   wheels/*.whl               CPython 3.12 wheels the GPU image lacks: google-crc32c (the
#                              TFRecord reader), simplejpeg (CPU decode), cffi + pycparser
#                              (Horovod's build needs cffi)
#   data/                      TFRecords written by `azdl data prepare`'s converter from
#                              generated JPEGs of ImageNet's typical size (~500x375, ~110 kB)
# The GPU machine has no TensorFlow, which the converter needs, hence data made here.
#
# Usage: bash benchmarks/gpu/prep.sh [TRAIN_IMAGES] [VALIDATION_IMAGES]   (default 352 and 32)
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
carry=.gpu-carry
train_images=${1:-352}
validation_images=${2:-32}
exclude=$(git rev-parse --git-path info/exclude)
grep -qxF "/$carry/" "$exclude" 2>/dev/null || echo "/$carry/" >> "$exclude"
rm -rf "$carry" && mkdir -p "$carry/wheels"
python=${PYTHON:-.venv-train/bin/python}

echo "==> Horovod 0.28.1 source release"
sha=$(sed -n 's/^HOROVOD_SDIST_SHA256=//p' training/install/build_horovod.sh)
"$python" -m pip download -q --no-deps --no-binary :all: -d "$carry" horovod==0.28.1
echo "$sha  $carry/horovod-0.28.1.tar.gz" | sha256sum --check --quiet

echo "==> wheels for the GPU machine's CPython 3.12"
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$carry/wheels" \
    "$(grep -E '^google-crc32c==' training/requirements.txt | cut -d' ' -f1)" \
    "$(grep -E '^simplejpeg==' training/requirements.txt | cut -d' ' -f1)" \
    "$(grep -E '^cffi==' training/requirements.txt | cut -d' ' -f1)" pycparser==2.22

echo "==> $train_images + $validation_images JPEGs (~500x375), converted by the data tool"
classes=16
jpeg=$(mktemp -d)
trap 'rm -rf "$jpeg"' EXIT
# --size 440: sides of 330-550 px, on average about ImageNet's 500x375 pixels.
PYTHONPATH=$root "$python" -m training.data.prepare.sample "$jpeg/images" --classes $classes \
    --train-per-class $((train_images / classes)) \
    --validation-per-class $((validation_images / classes)) --size 440
PYTHONPATH=$root "$python" -m training.data.prepare.convert --input "$jpeg/images" \
    --output "$carry/data" --train-shards 16 --validation-shards 2
du -sh "$carry"
total=$(du -sb "$carry" | cut -f1)
if (( total > 60 * 1024 * 1024 )); then
    echo "error: $carry holds $total bytes; the device tool carries at most 64 MiB with the tree" >&2
    exit 1
fi
echo "ready: carry [\"$carry\"] and run: bash benchmarks/gpu/run.sh"
