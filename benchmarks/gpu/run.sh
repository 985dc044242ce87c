#!/usr/bin/env bash
# P3 (ResNet50 training throughput of the PyTorch flavour on one GPU, with Horovod) in calls
# that each fit one device-tool command (600 s). Here first: `bash benchmarks/gpu/prep.sh`.
# Then on the GPU machine, three calls, one after the other while it stays warm:
#
#   run(command="bash benchmarks/gpu/run.sh build", carry=[".gpu-carry"], timeout_s=600)
#   run(command="bash benchmarks/gpu/run.sh bench synthetic", carry=[".gpu-carry"], timeout_s=600)
#   run(command="bash benchmarks/gpu/run.sh bench real", carry=[".gpu-carry"], timeout_s=600)
#
# build  installs the carried wheels and builds Horovod 0.28.1 once, into .gpu-build/ (kept
#        between calls while the machine is held; a fresh machine needs `build` again):
#        training/install/build_horovod.sh with the project's C++17 patch (applied by patch-ng,
#        carried: the image may lack `patch`), CMake from the machine's PyPI `cmake` package
#        (4.x: CMAKE_POLICY_VERSION_MINIMUM=3.5 for Horovod's Gloo), PyTorch + Gloo, NCCL from
#        the machine's nvidia-nccl-cu13 wheel (the NCCL torch itself loads), kernels for sm_90
#        (H100, H200); no TensorFlow, MXNet or MPI. It stops unless `horovodrun --check-build`
#        shows PyTorch, Gloo (and NCCL on a GPU) and `import horovod.torch` works.
# bench  runs one group of P3 variants (benchmarks/gpu/p3_resnet50.py; each under its own
#        time limit), every one with Horovod unless the variant is about running without it,
#        and rewrites the results file through p3_report.py after each: a variant that fails
#        is listed as failed, the ones before it stay. Exits non-zero if any failed.
#        synthetic: synthetic data; channels-last weights (no Horovod: horovod/horovod#3491);
#        torch.compile (no Horovod). real: the carried TFRecords, GPU (nvJPEG) and CPU decode.
#        Results: benchmarks/results/p3_gpu.{md,json}, copied with the logs to $OUT.
#
# bash benchmarks/gpu/run.sh --smoke [DIR]  runs all of it on a CPU machine, as CI does
# (tests/training/test_gpu_bench.py): a fresh virtual environment with the newest `cmake` from
# PyPI and the pinned CPU torch in place of the GPU image, prep.sh's carry with wheels for that
# Python, the same build without NCCL or CUDA, then every variant for 2 steps on CPU (tiny
# model, 32 px; the GPU-decode variant decodes on CPU). Its report goes to DIR, never to
# benchmarks/results: it checks the kit and measures nothing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$PWD
log() { echo "==> $(date -u +%H:%M:%S) $*"; }
die() { echo "error: $*" >&2; exit 1; }

mode=gpu
if [[ ${1:-} == --smoke ]]; then  # --smoke [DIR] [build | bench GROUP]: all stages by default
    mode=smoke
    shift
    dir=/tmp/p3-smoke
    if [[ $# -gt 0 && $1 != build && $1 != bench ]]; then dir=$1; shift; fi
    smoke=$(mkdir -p "$dir" && cd "$dir" && pwd)
    [[ $# -gt 0 ]] || set -- smoke
fi
stage=${1:-}
if [[ $mode == gpu ]]; then
    carry=$repo/.gpu-carry
    kit=$repo/.gpu-build
    out=${OUT:-/tmp/p3-out}
    results=$repo/benchmarks/results
    python=${PYTHON:-python3}
else
    carry=$smoke/carry
    kit=$smoke/kit
    out=$smoke/out
    results=$smoke/results
    python=$smoke/venv/bin/python
fi
site=$kit/site
mkdir -p "$out"

machine() {
    { if [[ $mode == gpu ]]; then
          nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
      fi
      "$python" -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda)"
      echo "cores $(nproc)"; gcc --version | head -1
      "$python" -m pip show cmake | grep -E '^(Name|Version)' | paste -sd' '
    } | tee "$out/machine.txt"
}

# What the carried wheels hold, and the kit's own Horovod, go into $site (PYTHONPATH).
use_site() { export PYTHONPATH=$site:$repo${PYTHONPATH:+:$PYTHONPATH}; }

# NCCL from the nvidia-nccl-cu13 wheel: its headers and library, wherever the wheel puts them.
nccl_dirs() {
    "$python" - <<'EOF'
import pathlib, nvidia
roots = [pathlib.Path(p) for p in nvidia.__path__]
header = next(p for r in roots for p in r.rglob("nccl.h"))
library = next(p for r in roots for p in r.rglob("libnccl.so.2"))
print(header.parent, library.parent)
EOF
}

# Horovod's PyTorch extension dlopen()s "libcuda.so" (horovod/torch/cuda_util.cc), the
# development name; a machine with the driver alone may only have libcuda.so.1. Then a link
# named libcuda.so in $kit/lib, on LD_LIBRARY_PATH, points at the driver's library.
cuda_driver_path() {
    if "$python" -c "import ctypes; ctypes.CDLL('libcuda.so')" 2>/dev/null; then return; fi
    local driver
    driver=$("$python" -c "
import ctypes
ctypes.CDLL('libcuda.so.1')
print(next(line.split()[-1] for line in open('/proc/self/maps') if 'libcuda.so' in line))
") || die "no CUDA driver library (libcuda.so.1) can be loaded"
    mkdir -p "$kit/lib" && ln -sfn "$driver" "$kit/lib/libcuda.so"
    echo "libcuda.so -> $driver (in $kit/lib)"
    export LD_LIBRARY_PATH=$kit/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

gpu_libraries() {
    [[ $mode == gpu ]] || return 0
    local dirs
    dirs=$(nccl_dirs) || die "no NCCL (nccl.h, libnccl.so.2) in the nvidia-nccl-cu13 wheel"
    nccl_include=${dirs% *} nccl_lib=${dirs#* }
    export LD_LIBRARY_PATH=$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    cuda_driver_path
}

build() {
    machine
    [[ -f $carry/horovod-0.28.1.tar.gz ]] || die "$carry/horovod-0.28.1.tar.gz is missing: run benchmarks/gpu/prep.sh here and carry $carry"
    rm -rf "$kit" && mkdir -p "$site" "$kit/wheel"
    log "carried wheels -> $site"
    "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target "$site" "$carry"/wheels/*.whl
    use_site
    cmake=$("$python" -c "import cmake, os; print(os.path.join(cmake.CMAKE_BIN_DIR, 'cmake'))") ||
        die "$python has no PyPI cmake package"
    local flags=(HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_TENSORFLOW=1
                 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_MPI=1)
    if [[ $mode == gpu ]]; then
        gpu_libraries
        # The wheel ships only libnccl.so.2; CMake's find_library looks for libnccl.so.
        mkdir -p "$kit/nccl-lib" && ln -sfn "$nccl_lib/libnccl.so.2" "$kit/nccl-lib/libnccl.so"
        flags+=(HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED
                HOROVOD_NCCL_INCLUDE=$nccl_include HOROVOD_NCCL_LIB=$kit/nccl-lib
                HOROVOD_BUILD_CUDA_CC_LIST=90 HOROVOD_CUDA_HOME=${CUDA_HOME:-/usr/local/cuda})
    fi
    log "building Horovod with $("$cmake" --version | head -1) (log: $out/build.log)"
    # Newer GCCs (13+) no longer pull <cstdint> in through other headers, and the Gloo copy in
    # Horovod 0.28.1 relies on that (pytorch/gloo#387, #448): include it everywhere.
    if ! env "${flags[@]}" CXXFLAGS="${CXXFLAGS:-} -include cstdint" HOROVOD_CMAKE="$cmake" \
        HOROVOD_PATCHER=patch-ng HOROVOD_SDIST="$carry/horovod-0.28.1.tar.gz" \
        HOROVOD_WHEEL_DIR="$kit/wheel" PYTHON="$python" \
        bash training/install/build_horovod.sh > "$out/build.log" 2>&1; then
        tail -40 "$out/build.log"
        die "Horovod did not build (the lines above; all of it in $out/build.log): nothing was measured"
    fi
    "$python" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$kit"/wheel/horovod-*.whl
    "$python" "$site/bin/horovodrun" --check-build | tee "$out/check-build.txt"
    local features=(PyTorch Gloo)
    [[ $mode == gpu ]] && features+=(NCCL)
    for feature in "${features[@]}"; do
        grep -qE "\[X\] $feature" "$out/check-build.txt" ||
            die "Horovod was built without $feature (see $out/check-build.txt)"
    done
    "$python" -c "import horovod.torch as hvd; hvd.init(); print('horovod.torch', hvd.size(), 'worker')" ||
        die "Horovod built, but horovod.torch does not load"
    cp "$out/check-build.txt" "$kit/horovod.ok"
    rm -f "$kit/p3.jsonl"
    log "Horovod built and installed in $site"
}

variants() {
    local cores
    cores=$(nproc)
    case $1 in
        synthetic) printf '%s\n' \
            "--data synthetic --label synthetic" \
            "--data synthetic --label synthetic-weights-channels-last --no-horovod --weights-channels-last" \
            "--data synthetic --label synthetic-compile --no-horovod --compile --warmup 30" ;;
        real) printf '%s\n' \
            "--data real --data-dir $carry/data --decode gpu --label real-gpu-decode" \
            "--data real --data-dir $carry/data --decode cpu --data-workers $((cores - 1)) --label real-cpu-decode" ;;
        *) die "unknown group '$1'; allowed: synthetic, real" ;;
    esac
}

bench() {
    local group=$1 failed=0 limit=150 smoke_args=() runs argv label
    runs=$(variants "$group")
    [[ -f $kit/horovod.ok ]] ||
        die "Horovod is not built on this machine ($kit/horovod.ok is missing): run 'bash benchmarks/gpu/run.sh build' first; nothing was measured"
    use_site
    "$python" -c "
import horovod, sys
sys.exit(0 if horovod.__file__.startswith('$site/') else f'horovod from {horovod.__file__}, not the kit build')
" || die "Horovod does not load from the kit's build in $site"
    gpu_libraries
    machine
    if [[ $mode == smoke ]]; then
        limit=600
        smoke_args=(--device cpu --model tiny --image-size 32 --batch-size 4 --warmup 1
                    --steps 2 --profile-steps 0 --decode cpu --data-workers 1)
    fi
    while read -r argv; do
        # shellcheck disable=SC2086  # argv is a list of words on purpose
        set -- $argv "${smoke_args[@]}"
        label=${argv##*--label }; label=${label%% *}
        log "p3_resnet50.py $*"
        if timeout "$limit" "$python" benchmarks/gpu/p3_resnet50.py "$@" < /dev/null > "$out/$label.log" 2>&1 &&
            grep '^{' "$out/$label.log" | tail -1 > "$out/row.json" && [[ -s $out/row.json ]]; then
            cat "$out/row.json" >> "$kit/p3.jsonl"
        else
            local status=$?
            tail -20 "$out/$label.log"
            echo "{\"label\": \"$label\", \"failed\": \"exit $status; log: $label.log\"}" >> "$kit/p3.jsonl"
            failed=1
        fi
        if grep -q images_per_sec "$kit/p3.jsonl"; then report; fi
    done <<< "$runs"
    rm -f "$out/row.json"
    return $failed
}

report() {
    local command="bash benchmarks/gpu/run.sh build; bash benchmarks/gpu/run.sh bench synthetic; bash benchmarks/gpu/run.sh bench real"
    local extra=()
    if [[ $mode == smoke ]]; then
        command="bash benchmarks/gpu/run.sh --smoke"
        extra=(--smoke)
    fi
    "$python" benchmarks/gpu/p3_report.py "$kit/p3.jsonl" --command "$command" \
        --results "$results" "${extra[@]}"
    cp "$results/p3_gpu.md" "$results/p3_gpu.json" "$out/"
}

smoke_environment() {
    local pins=()
    log "fresh virtual environment with the newest cmake from PyPI: $smoke/venv"
    rm -rf "$smoke/venv"
    # The training environment's interpreter, whose CPU torch build pip finds (docs/gpu.md).
    local base=${SMOKE_BASE_PYTHON:-}
    [[ -n $base ]] || base=$(.venv-train/bin/python -c "import sys; print(sys._base_executable)")
    "$base" -m venv "$smoke/venv"
    # What the GPU image has and this machine's CPU build stands in for, at the training pins.
    for name in torch numpy pillow psutil PyYAML cloudpickle packaging; do
        pins+=("$(grep -E "^$name==" training/requirements.txt | cut -d' ' -f1)")
    done
    "$python" -m pip install -q --upgrade "cmake>=4" "${pins[@]}" setuptools==84.2.1 wheel==0.48.0
    local major
    major=$("$python" -c "import cmake; print(cmake.__version__.split('.')[0])")
    (( major >= 4 )) || die "the smoke run is meant to build with CMake 4 or newer, got $major"
    log "carry for CPython $("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    GPU_CARRY=$carry GPU_PYTHON_VERSION=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
        PYTHON=${PREP_PYTHON:-$repo/.venv-train/bin/python} bash benchmarks/gpu/prep.sh 32 16
}

case $stage in
    build) build ;;
    bench) bench "${2:?bench needs a group: synthetic or real}" ;;
    smoke)
        smoke_environment
        build
        bench synthetic
        bench real
        cat "$results/p3_gpu.md"
        log "smoke run passed" ;;
    *) die "usage: run.sh build | run.sh bench synthetic|real | run.sh --smoke [DIR] [build | bench GROUP]" ;;
esac
[[ $stage == bench ]] && cat "$results/p3_gpu.md"
exit 0
