#!/usr/bin/env bash
# Run HERE (a machine with network and the training environment), before the GPU run: puts
# what the GPU machine may lack into .gpu-carry/ (git-ignored by the repository's .gitignore),
# to copy there with the repository:
#   horovod-0.28.1.tar.gz      Horovod's source release (checksum as training/install pins it)
#   wheels/*.whl               wheels the GPU machine may lack, for its CPython 3.12: cmake at the
#                              version build_horovod.sh pins (Horovod's build), google-crc32c
#                              and protobuf (the TFRecord reader, training.data.example_codec),
#                              simplejpeg (CPU decode), cffi + pycparser
#                              (Horovod's build needs cffi), patch-ng (applies Horovod's patch
#                              where no `patch` program is installed)
#   data/                      TFRecords written by `azdl data prepare`'s converter from
#                              generated JPEGs of ImageNet's typical size (~500x375, ~110 kB)
# The GPU machine may have no TensorFlow, which the converter needs, hence data made here.
#
# Usage: bash benchmarks/gpu/prep.sh [--max-mib MIB] [TRAIN_IMAGES] [VALIDATION_IMAGES]
#   (default 352 and 32 images, no size limit). --max-mib MIB: fail if .gpu-carry/ ends up
#   larger, for a copy to the GPU machine that is limited in size (fewer images make it smaller).
# GPU_CARRY=DIR writes there instead of .gpu-carry; GPU_PYTHON_VERSION=X.Y fetches wheels for
# that CPython (default 3.12); run.sh --smoke uses both.
# Needs no git: it works in a plain copy of the repository and in a git worktree alike.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
usage="usage: prep.sh [--max-mib MIB] [TRAIN_IMAGES] [VALIDATION_IMAGES]"
max_mib=
if [[ ${1:-} == --max-mib ]]; then
    [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || { echo "error: --max-mib '${2:-}'; allowed: a whole number of MiB. $usage" >&2; exit 1; }
    max_mib=$2
    shift 2
fi
train_images=${1:-352}
validation_images=${2:-32}
for count in "$train_images" "$validation_images"; do
    [[ $count =~ ^[1-9][0-9]*$ ]] || { echo "error: '$count' images; allowed: a whole number. $usage" >&2; exit 1; }
done
carry=${GPU_CARRY:-.gpu-carry}
python_version=${GPU_PYTHON_VERSION:-3.12}
python=${PYTHON:-.venv-train/bin/python}
rm -rf "$carry" && mkdir -p "$carry/wheels"

echo "==> Horovod 0.28.1 source release"
build=training/install/build_horovod.sh
sha=$(sed -n 's/^HOROVOD_SDIST_SHA256=//p' "$build")
"$python" -m pip download -q --no-deps --no-binary :all: -d "$carry" horovod==0.28.1
echo "$sha  $carry/horovod-0.28.1.tar.gz" | sha256sum --check --quiet

echo "==> wheels for CPython $python_version"
pin() { grep -E "^$1==" training/requirements.txt | cut -d' ' -f1; }
"$python" -m pip download -q --no-deps --only-binary=:all: --python-version "$python_version" \
    --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -d "$carry/wheels" \
    "cmake==$(sed -n 's/^CMAKE_VERSION=//p' "$build")" \
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
if [[ -n $max_mib ]] && (( total > max_mib * 1024 * 1024 )); then
    echo "error: $carry holds $total bytes, over --max-mib $max_mib; fewer images make it smaller" \
        "(prep.sh --max-mib $max_mib TRAIN_IMAGES VALIDATION_IMAGES)" >&2
    exit 1
fi
echo "ready: copy $carry to the GPU machine with the repository, then run benchmarks/gpu/run.sh there"
