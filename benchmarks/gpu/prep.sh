#!/usr/bin/env bash
# Run HERE (a machine with network and the training environment), before a GPU session: puts
# what the GPU machine lacks into .gpu-carry/ (git-ignored by the repository's .gitignore),
# which the device tool's `run` carries there (limit 64 MiB):
#   horovod-0.28.1.tar.gz      Horovod's source release (checksum as training/install pins it)
#   wheels/*.whl               wheels the GPU image lacks, for its CPython 3.12: google-crc32c
#                              and protobuf (the TFRecord reader, training.data.example_codec),
#                              simplejpeg (CPU decode), cffi + pycparser
#                              (Horovod's build needs cffi), patch-ng (applies Horovod's patch
#                              where no `patch` program is installed)
#   data/                      TFRecords written by `azdl data prepare`'s converter from
#                              generated JPEGs of ImageNet's typical size (~500x375, ~110 kB)
# The GPU machine has no TensorFlow, which the converter needs, hence data made here.
#
# Usage: bash benchmarks/gpu/prep.sh [TRAIN_IMAGES] [VALIDATION_IMAGES]   (default 352 and 32)
# GPU_CARRY=DIR writes there instead of .gpu-carry; GPU_PYTHON_VERSION=X.Y fetches wheels for
# that CPython (default 3.12, the GPU machine's); run.sh --smoke uses both.
# Needs no git: it works in a plain copy of the repository and in a git worktree alike.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
carry=${GPU_CARRY:-.gpu-carry}
python_version=${GPU_PYTHON_VERSION:-3.12}
train_images=${1:-352}
validation_images=${2:-32}
python=${PYTHON:-.venv-train/bin/python}
rm -rf "$carry" && mkdir -p "$carry/wheels"

echo "==> Horovod 0.28.1 source release"
sha=$(sed -n 's/^HOROVOD_SDIST_SHA256=//p' training/install/build_horovod.sh)
"$python" -m pip download -q --no-deps --no-binary :all: -d "$carry" horovod==0.28.1
echo "$sha  $carry/horovod-0.28.1.tar.gz" | sha256sum --check --quiet

echo "==> wheels for CPython $python_version"
pin() { grep -E "^$1==" training/requirements.txt | cut -d' ' -f1; }
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$carry/wheels" \
    "$(pin google-crc32c)" "$(pin protobuf)" "$(pin simplejpeg)" "$(pin cffi)" pycparser==2.22 patch-ng==1.19.1

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
echo "ready: carry [\"$carry\"] and run the calls in benchmarks/gpu/run.sh's header"
