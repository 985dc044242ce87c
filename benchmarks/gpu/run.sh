#!/usr/bin/env bash
# Run ON THE GPU MACHINE (device tool), after benchmarks/gpu/prep.sh ran here:
#
#   run(command="bash benchmarks/gpu/run.sh", carry=[".gpu-carry"], timeout_s=600)
#
# 1. installs the carried wheels (google-crc32c, cffi) into /tmp/site;
# 2. builds Horovod 0.28.1 from the carried source release with the project's C++17 patch
#    (training/install/build_horovod.sh), PyTorch + Gloo, NCCL for GPU collectives from the
#    machine's nvidia-nccl-cu13 wheel (the NCCL torch itself loads), kernels for sm_90 (H100,
#    H200); MPI is left out (no Open MPI development files there; one machine needs none);
# 3. runs P3 (benchmarks/gpu/p3_resnet50.py): ResNet50, 224 px, bf16, channels-last, batch 256,
#    synthetic data, then the carried TFRecords with GPU (nvJPEG) and CPU (Pillow workers)
#    decode; with Horovod, and without it for the channels-last-weights and --compile rows;
# 4. writes benchmarks/results/p3_gpu.{md,json} and copies them, with the logs, to $OUT.
#
# Stages: bash benchmarks/gpu/run.sh [all|build|bench]   (bench expects Horovod built already)
# Budget: the build takes several minutes on 16 cores, the runs about 3; one 600 s call.
set -euo pipefail
cd "$(dirname "$0")/../.."
stage=${1:-all}
carry=.gpu-carry
out=${OUT:-/tmp/p3-out}
mkdir -p "$out" benchmarks/results
python=${PYTHON:-python3}
log() { echo "==> $(date -u +%H:%M:%S) $*"; }

{ nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$python" -c "import sys, torch, torchvision; print(sys.version.split()[0], torch.__version__, torchvision.__version__, torch.version.cuda)"
  nproc; gcc --version | head -1 || true
  "${CUDA_HOME:-/usr/local/cuda}/bin/nvcc" --version | tail -1 || true; } | tee "$out/machine.txt"

log "carried wheels"
"$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site "$carry"/wheels/*.whl
export PYTHONPATH=/tmp/site:$PWD${PYTHONPATH:+:$PYTHONPATH}

if [[ $stage == all || $stage == build ]]; then
    log "NCCL from the nvidia-nccl-cu13 wheel"
    nccl=$("$python" -c "import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])")
    ls "$nccl/include/nccl.h" "$nccl"/lib/libnccl.so.2
    # The wheel ships only libnccl.so.2; CMake's find_library looks for libnccl.so.
    mkdir -p /tmp/nccl-lib && ln -sf "$nccl/lib/libnccl.so.2" /tmp/nccl-lib/libnccl.so
    export LD_LIBRARY_PATH=$nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    log "building Horovod (log: $out/build.log)"
    # Newer GCCs (13+) no longer pull <cstdint> in through other headers, and the Gloo copy in
    # Horovod 0.28.1 relies on that (pytorch/gloo#387, #448): include it everywhere.
    export CXXFLAGS="${CXXFLAGS:-} -include cstdint"
    if ! HOROVOD_SDIST=$carry/horovod-0.28.1.tar.gz PYTHON=$python \
        HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED \
        HOROVOD_NCCL_INCLUDE=$nccl/include HOROVOD_NCCL_LIB=/tmp/nccl-lib \
        HOROVOD_BUILD_CUDA_CC_LIST=90 HOROVOD_CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} \
        HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 \
        HOROVOD_WITHOUT_MPI=1 HOROVOD_WITH_GLOO=1 \
        bash training/install/build_horovod.sh > "$out/build.log" 2>&1; then
        tail -40 "$out/build.log"
        echo "Horovod did not build: see build.log; the runs below go on without it" >&2
    fi
    horovodrun --check-build 2>&1 | tee "$out/check-build.txt" || true
fi
[[ $stage == build ]] && exit 0

export LD_LIBRARY_PATH=$("$python" -c "import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])")/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
horovod=()
"$python" -c "import horovod.torch" 2>/dev/null || horovod=(--no-horovod)
cores=$(nproc)
runs=(
    "--data synthetic --label synthetic ${horovod[*]}"
    "--data synthetic --label synthetic-weights-channels-last --no-horovod --weights-channels-last"
    "--data real --data-dir $carry/data --decode gpu --label real-gpu-decode ${horovod[*]}"
    "--data real --data-dir $carry/data --decode cpu --data-workers $((cores - 1)) --label real-cpu-decode ${horovod[*]}"
    "--data synthetic --label synthetic-compile --no-horovod --compile --warmup 30"
)
: > "$out/p3.jsonl"
for argv in "${runs[@]}"; do
    log "p3_resnet50.py $argv"
    # shellcheck disable=SC2086  # argv is a list of words on purpose
    if ! timeout 150 "$python" benchmarks/gpu/p3_resnet50.py $argv > "$out/run.log.tmp" 2>&1; then
        tail -20 "$out/run.log.tmp"
    fi
    cat "$out/run.log.tmp" >> "$out/runs.log"
    grep '^{' "$out/run.log.tmp" | tail -1 >> "$out/p3.jsonl" || true
done
rm -f "$out/run.log.tmp"
"$python" benchmarks/gpu/p3_report.py "$out/p3.jsonl" --command "bash benchmarks/gpu/run.sh $stage"
cp benchmarks/results/p3_gpu.md benchmarks/results/p3_gpu.json "$out/"
cat benchmarks/results/p3_gpu.md
