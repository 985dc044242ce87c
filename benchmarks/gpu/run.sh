#!/usr/bin/env bash
# P3 (ResNet50 training throughput of the PyTorch flavour on one GPU) as ONE command.
# docs/gpu.md gives the procedure. First, on a machine with network: bash benchmarks/gpu/prep.sh
# (.gpu-carry/). Then, on the GPU machine, in the repository with .gpu-carry/ beside it:
#
#   bash benchmarks/gpu/run.sh [--budget SECONDS]
#
# It runs, in this order, and rewrites the results file through p3_report.py after each step,
# so a run cut short still leaves every figure measured so far:
#   1. what needs no build (benchmarks/gpu/p3_resnet50.py, one process each): eager fp32;
#      channels-last fp32; bf16 + channels-last ("synthetic", the P3 row); torch.compile; real
#      data from the carried TFRecords with GPU (nvJPEG) and CPU decode; DDP in one process
#      (torch.distributed, a world of one: NCCL on a GPU, Gloo on the CPU). The synthetic rows
#      run under torch.cuda.set_sync_debug_mode("error") (--sync-debug): a host sync inside a
#      step fails the row.
#   2. last: Horovod 0.28.1 built from the carried source (training/install/build_horovod.sh
#      with the project's C++17 patch and the CMake it pins, from the carried cmake wheel;
#      PyTorch + Gloo + NCCL from the nvidia-nccl-cu13 wheel, sm_90, no TensorFlow, MXNet or
#      MPI), then its row. With one worker Horovod registers no gradient hooks, so that row
#      measures plain PyTorch under hvd.init, and is labelled so.
# Each variant runs under a time limit of three times what it is estimated to need, so a hung
# one leaves the others their time. --budget SECONDS (default: none) is for a machine held for
# a limited time: a step then starts only if the time left covers what it needs, else it is
# listed as skipped, and a variant's limit is at most the time left.
# Results: benchmarks/results/p3_gpu.{md,json}, copied with the logs to $OUT (or /tmp/p3-out).
# Exits non-zero if any step failed or was skipped.
#
# bash benchmarks/gpu/run.sh --smoke [DIR] [measure | horovod]  rehearses the command on a CPU
# machine after `make setup`, as CI does (tests/training/test_gpu_bench.py): a fresh virtual
# environment in place of the GPU image, with the images' pip, setuptools and wheel and the pinned
# CPU torch (linked from .venv-train, which set-up installed from the same pins),
# prep.sh's carry with wheels for that Python, every variant for 2 steps on CPU (tiny model,
# 32 px; no sync check: it needs CUDA; torch.compile captures the graphs but generates no
# kernels: TORCH_COMPILE_OVERRIDE_BACKENDS below) but the GPU-decode one, listed as GPU only (on
# a CPU it would decode on the CPU: the CPU-decode variant's run again), then, in
# place of a second Horovod build, the wheel scripts/setup-training.sh built for .venv-train (the same
# build_horovod.sh, patch and CMake pin, with TensorFlow and MPI as well, no CUDA), refused
# unless it was built from this tree's recipe (setup-training.sh --check-horovod), installed
# and checked as a GPU run installs its own, then its row. --build-horovod builds from the
# carried source instead, as a GPU run does (without NCCL or CUDA). Its report goes to DIR,
# never to benchmarks/results: it checks the kit and measures nothing. `measure` or `horovod`
# runs that part alone, in the environment and carry a full smoke run left in DIR.
# `measure LABEL...` (on a GPU too) runs those variants alone, a rerun of what failed; the
# report then holds these rows.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$PWD
log() { echo "==> $(date -u +%H:%M:%S) $*"; }
die() { echo "error: $*" >&2; exit 1; }
usage="usage: run.sh [--budget SECONDS] [measure [LABEL...] | horovod] | run.sh --smoke [DIR] [--budget SECONDS] [--build-horovod] [measure [LABEL...] | horovod]"

mode=gpu
stage=all
budget=
build=
while [[ ${1:-} == --* ]]; do
    case $1 in
        --smoke)
            mode=smoke
            shift
            dir=/tmp/p3-smoke
            if [[ $# -gt 0 && $1 != --* && $1 != measure && $1 != horovod ]]; then dir=$1; shift; fi ;;
        --budget)
            [[ ${2:-} =~ ^[0-9]+$ ]] || die "--budget '${2:-}'; allowed: whole seconds. $usage"
            budget=$2
            shift 2 ;;
        --build-horovod) build=1; shift ;;
        *) die "unknown option '$1'. $usage" ;;
    esac
done
if [[ $# -gt 0 ]]; then stage=$1; shift; fi
only=" $* "  # measure LABEL...: those variants alone (a rerun of what failed)
[[ $stage =~ ^(all|measure|horovod)$ ]] || die "unknown step '$stage'. $usage"
[[ $stage == measure || $# -eq 0 ]] || die "only 'measure' takes labels. $usage"
[[ $mode == smoke || -z $build ]] || die "--build-horovod is for --smoke: a GPU run always builds Horovod"

if [[ $mode == gpu ]]; then
    carry=$repo/.gpu-carry
    kit=$repo/.gpu-build
    out=${OUT:-/tmp/p3-out}
    results=$repo/benchmarks/results
    python=${PYTHON:-python3}
else
    smoke=$(mkdir -p "$dir" && cd "$dir" && pwd)
    carry=$smoke/carry
    kit=$smoke/kit
    out=$smoke/out
    results=$smoke/results
    python=$smoke/venv/bin/python
    train=$repo/.venv-train
    # torch.compile in the smoke run: graph capture and the backward graph (PyTorch's aot_eager
    # backend), no generated kernels. Inductor's C++ for a CPU is not the Triton code a GPU run
    # compiles, and compiling it with an empty kernel cache, as CI's always is, was the smoke
    # run's slowest step (benchmarks/results/test_time.md: the kit's time before and after).
    # PyTorch's own override (torch/_dynamo/config.py, torch 2.13: "for debugging/bisecting"),
    # every graph from the first; the flavour's --compile is untouched.
    export TORCH_COMPILE_OVERRIDE_BACKENDS=">=0:aot_eager"
    # The set-up's Horovod has MPI as well, and Horovod picks MPI's controller and CPU
    # operations wherever it was built with MPI (horovod/common/utils/env_parser.cc, v0.28.1);
    # a GPU run's build has Gloo only. The rehearsal's Horovod row runs Gloo's, as a GPU run's does.
    export HOROVOD_CONTROLLER=gloo HOROVOD_CPU_OPERATIONS=gloo
fi
site=$kit/site
mkdir -p "$out"
failed=0
picked=0

left() { echo $((budget - SECONDS)); }  # with --budget only

machine() {
    { if [[ $mode == gpu ]]; then
          nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
      fi
      # torch's build facts from its version.py, without importing torch (1.5 s of a CPU each
      # time): the variants import it.
      "$python" -c "
import importlib.util, pathlib, runpy, sys
torch = runpy.run_path(str(pathlib.Path(importlib.util.find_spec('torch').origin).with_name('version.py')))
print('python', sys.version.split()[0], 'torch', torch['__version__'], 'cuda', torch['cuda'])"
      echo "cores $(nproc)"; gcc --version | head -1
      "$python" -c "
from importlib.metadata import version, PackageNotFoundError
for name in ('setuptools', 'wheel'):
    try:
        print(name, version(name))
    except PackageNotFoundError:
        print(name, 'absent')"
    } | tee "$out/machine.txt"
}

# What the carried wheels hold, and the kit's own Horovod, go into $site (PYTHONPATH).
use_site() { export PYTHONPATH=$site:$repo${PYTHONPATH:+:$PYTHONPATH}; }

# A `measure` rerun keeps what an earlier run installed from the same wheels (their checksums,
# recorded at install): the cmake wheel alone is 4,000 files.
carried_wheels() {
    [[ -d $carry/wheels ]] || die "$carry/wheels is missing: run benchmarks/gpu/prep.sh on a machine with network and copy $carry here"
    local sums
    sums=$(cd "$carry/wheels" && sha256sum ./*.whl)
    if [[ $stage == measure && -f $kit/wheels.sha256 && $sums == "$(cat "$kit/wheels.sha256")" ]]; then
        log "carried wheels: installed in $site already, from the same files"
        rm -f "$kit/p3.jsonl"
    else
        rm -rf "$kit" && mkdir -p "$site" "$kit/wheel"
        log "carried wheels -> $site"
        "$python" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
            --target "$site" "$carry"/wheels/*.whl
        echo "$sums" > "$kit/wheels.sha256"
    fi
    use_site
}

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

# What Horovod's CMake needs of the CUDA toolkit (Horovod 0.28.1 CMakeLists.txt): nvcc at
# $HOROVOD_CUDA_HOME/bin/nvcc, and, as CMAKE_CUDA_RUNTIME_LIBRARY defaults to "Static" there,
# the static CUDA runtime libcudart_static.a. The toolkit is where CUDA_HOME says, else where
# the nvcc on PATH is.
cuda_toolkit() {
    local home=${CUDA_HOME:-}
    if [[ -z $home ]]; then
        local nvcc
        nvcc=$(command -v nvcc) || die "no nvcc on PATH and no CUDA_HOME: Horovod's CUDA kernels need the CUDA compiler"
        home=$(dirname "$(dirname "$(readlink -f "$nvcc")")")
    fi
    [[ -x $home/bin/nvcc ]] || die "no $home/bin/nvcc (CUDA_HOME=$home): Horovod's CMake looks there"
    local static
    static=$(find -L "$home" -name libcudart_static.a -print -quit 2>/dev/null)
    [[ -n $static ]] || die "no libcudart_static.a under $home: Horovod 0.28.1 links the static CUDA runtime (CMAKE_CUDA_RUNTIME_LIBRARY=Static)"
    echo "CUDA toolkit $home: $("$home/bin/nvcc" --version | tail -1); static runtime $static"
    cuda_home=$home
}

# Horovod's torch/CMakeLists.txt runs `python -c "from distutils.sysconfig import
# get_python_inc"` in a plain interpreter. Python 3.12's standard library has no distutils
# (PEP 632); setuptools supplies it through the distutils-precedence.pth file it installs in
# site-packages (its _distutils_hack, SETUPTOOLS_USE_DISTUTILS=local by default). A .pth file
# works only from a site-packages folder, not from a PYTHONPATH entry such as $site.
distutils_check() {
    "$python" -c "
import distutils, sys
from distutils.sysconfig import get_python_inc
if '_distutils' not in distutils.__file__:
    sys.exit(f'distutils comes from {distutils.__file__}, not setuptools')
print('distutils from', distutils.__file__, '-> Python headers', get_python_inc())
" || die "$python cannot import distutils from setuptools, which Horovod's build needs on Python 3.12 (install setuptools into its site-packages)"
}

gpu_libraries() {
    [[ $mode == gpu ]] || return 0
    local dirs
    dirs=$(nccl_dirs) || die "no NCCL (nccl.h, libnccl.so.2) in the nvidia-nccl-cu13 wheel"
    nccl_include=${dirs% *} nccl_lib=${dirs#* }
    export LD_LIBRARY_PATH=$nccl_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    cuda_driver_path
}

# One line of the results' JSON lines: a measured row, or why a step has none.
record() { echo "$1" >> "$kit/p3.jsonl"; }
not_measured() {  # label kind why
    record "{\"label\": \"$1\", \"$2\": \"$3\"}"
    failed=1
}

report() {
    local command="bash benchmarks/gpu/run.sh" extra=()
    if [[ $mode == smoke ]]; then
        command="bash benchmarks/gpu/run.sh --smoke"
        extra=(--smoke)
    fi
    [[ -z $budget ]] || command+=" --budget $budget"
    [[ -z $budget ]] || extra+=(--budget "$budget")
    "$python" benchmarks/gpu/p3_report.py "$kit/p3.jsonl" --command "$command" \
        --results "$results" "${extra[@]}"
    cp "$results/p3_gpu.md" "$results/p3_gpu.json" "$out/"
}

# One variant: label, seconds it needs, then p3_resnet50.py's arguments. It runs under a time
# limit of three times its need (a hung variant leaves time to the next); with --budget, only if
# the time left covers its need, and for at most the time left. The report is rewritten after.
# The needs are estimates from the step counts, not GPU readings: a GPU run will show.
variant() {
    local label=$1 need=$2 limit=$((3 * $2)) remaining
    shift 2
    [[ $only == "  " || $only == *" $label "* ]] || return 0
    picked=$((picked + 1))
    if [[ -n $budget ]]; then
        remaining=$(left)
        limit=$((remaining < limit ? remaining : limit))
    fi
    if [[ -n $budget ]] && ((remaining < need)); then
        log "$label skipped: ${remaining}s left of ${budget}s, it needs ${need}s"
        not_measured "$label" skipped "${remaining} s left of the ${budget} s budget; it needs ${need} s"
    elif [[ $mode == smoke && " $* " == *" --decode gpu "* ]]; then
        # On a CPU it would decode on the CPU: real-cpu-decode's run again, under another label.
        log "$label not rehearsed: it decodes on the GPU; on a CPU it is real-cpu-decode's run"
        record "{\"label\": \"$label\", \"gpu_only\": \"decodes on the GPU (nvJPEG); on a CPU it would be real-cpu-decode's run\"}"
    else
        local argv=(--label "$label" "$@")
        if [[ $mode == smoke ]]; then
            # The GPU's arguments less the sync check (it needs CUDA), then the CPU's, which win.
            local word gpu_argv=("${argv[@]}")
            argv=()
            for word in "${gpu_argv[@]}"; do [[ $word == --sync-debug ]] || argv+=("$word"); done
            argv+=(--device cpu --model tiny --image-size 32 --batch-size 4 --warmup 1
                   --steps 2 --profile-steps 0 --decode cpu --data-workers 1)
        fi
        log "p3_resnet50.py ${argv[*]} (at most ${limit}s)"
        if timeout "$limit" "$python" benchmarks/gpu/p3_resnet50.py ${argv[@]+"${argv[@]}"} \
            < /dev/null > "$out/$label.log" 2>&1 &&
            grep '^{' "$out/$label.log" | tail -1 > "$out/row.json" && [[ -s $out/row.json ]]; then
            record "$(cat "$out/row.json")"
        else
            local status=$?
            tail -20 "$out/$label.log"
            not_measured "$label" failed "exit $status; log: $label.log"
        fi
        rm -f "$out/row.json"
    fi
    report
}

measure() {
    local data=$carry/data cores
    cores=$(nproc)
    [[ -d $data ]] || log "no $data: the real-data rows will fail (run prep.sh and copy $carry here)"
    variant eager-fp32 45 --precision fp32 --no-channels-last --sync-debug
    variant channels-last-fp32 45 --precision fp32 --sync-debug
    variant synthetic 45 --precision bf16 --sync-debug
    variant synthetic-compile 150 --compile --warmup 30 --sync-debug
    variant real-gpu-decode 60 --data real --data-dir "$data" --decode gpu
    variant real-cpu-decode 60 --data real --data-dir "$data" --decode cpu \
        --data-workers $((cores - 1))
    variant ddp-1-process 45 --workers ddp --sync-debug
    ((picked > 0)) || die "no variant is named${only% }; the variants: eager-fp32 channels-last-fp32 synthetic synthetic-compile real-gpu-decode real-cpu-decode ddp-1-process"
}

# A Horovod WHEEL into $site, as the kit uses it, checked in one interpreter: horovod loads
# from $site, its PyTorch extension loads, and that extension was built with Gloo (and NCCL on
# a GPU). These are the functions `horovodrun --check-build` calls (horovod/common/basics.py,
# v0.28.1), but it calls each in a forked process per framework and feature, each importing
# torch again: 8 s of a CPU in the smoke run, 2 s this way.
install_horovod() {
    "$python" -m pip install -q --no-index --no-deps --no-compile --target "$site" "$1" || return 1
    local need=Gloo
    [[ $mode == gpu ]] && need="Gloo NCCL"
    "$python" - "$site" $need <<'EOF' | tee "$out/horovod-build.txt" || return 1
import sys

import horovod

site, need = sys.argv[1], sys.argv[2:]
if not horovod.__file__.startswith(site + "/"):
    sys.exit(f"error: horovod loads from {horovod.__file__}, not the kit's build in {site}")
import horovod.torch as hvd  # its PyTorch extension: fails if that was not built

built = {"Gloo": hvd.gloo_built(), "NCCL": hvd.nccl_built(), "MPI": hvd.mpi_built(),
         "CUDA": hvd.cuda_built()}
print(f"Horovod {horovod.__version__} in {site}, PyTorch extension loaded; built with:",
      ", ".join(f"{name} {'yes' if on else 'no'}" for name, on in built.items()))
missing = [name for name in need if not built[name]]
if missing:
    sys.exit(f"error: Horovod was built without {', '.join(missing)}")
EOF
    log "Horovod installed in $site from $1"
}

# The Horovod build: what it needs of the machine checked first, each with its own error.
# build_horovod.sh takes the CMake it pins from the carried cmake wheel ($site).
build_horovod() {
    [[ -f $carry/horovod-0.28.1.tar.gz ]] || die "$carry/horovod-0.28.1.tar.gz is missing: run benchmarks/gpu/prep.sh and copy $carry here"
    distutils_check
    local flags=(HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_TENSORFLOW=1
                 HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITHOUT_MPI=1)
    if [[ $mode == gpu ]]; then
        cuda_toolkit
        # The wheel ships only libnccl.so.2; CMake's find_library looks for libnccl.so.
        mkdir -p "$kit/nccl-lib" && ln -sfn "$nccl_lib/libnccl.so.2" "$kit/nccl-lib/libnccl.so"
        flags+=(HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_NCCL_LINK=SHARED
                HOROVOD_NCCL_INCLUDE=$nccl_include HOROVOD_NCCL_LIB=$kit/nccl-lib
                HOROVOD_BUILD_CUDA_CC_LIST=90 HOROVOD_CUDA_HOME=$cuda_home)
    fi
    log "building Horovod (log: $out/build.log)"
    rm -rf "$kit/wheel" && mkdir -p "$kit/wheel"
    if ! env "${flags[@]}" HOROVOD_PATCHER=patch-ng HOROVOD_SDIST="$carry/horovod-0.28.1.tar.gz" \
        HOROVOD_WHEEL_DIR="$kit/wheel" PYTHON="$python" \
        bash training/install/build_horovod.sh > "$out/build.log" 2>&1; then
        tail -40 "$out/build.log"
        echo "error: Horovod did not build (the lines above; all of it in $out/build.log)" >&2
        return 1
    fi
    install_horovod "$(echo "$kit"/wheel/horovod-*.whl)"
}

# The rehearsal's Horovod: the wheel the training environment's set-up built, refused unless
# it was built from this tree's recipe (build_horovod.sh, its patch, the build tools, the
# frameworks), then installed and checked as a GPU run installs the one it builds.
training_horovod() {
    log "Horovod: the wheel scripts/setup-training.sh built ($train/horovod-wheel), not a second build"
    distutils_check
    bash scripts/setup-training.sh --check-horovod || return 1
    local wheels=("$train"/horovod-wheel/horovod-*.whl)
    [[ -f ${wheels[0]} ]] || {
        echo "error: no Horovod wheel in $train/horovod-wheel: run make setup-training" >&2
        return 1
    }
    install_horovod "${wheels[0]}"
}

horovod() {
    local label=horovod-1-worker-no-hooks need=${HOROVOD_NEED_S:-360}
    if [[ -n $budget ]] && (($(left) < need)); then
        log "Horovod skipped: $(left)s left of ${budget}s, its build and row need ${need}s"
        not_measured "$label" skipped "$(left) s left of the ${budget} s budget; the build and row need ${need} s"
        report
        return
    fi
    if [[ $mode == smoke && -z $build ]]; then
        if ! training_horovod; then
            not_measured "$label" failed "the training environment's Horovod cannot be used (above)"
            report
            return
        fi
    elif ! build_horovod; then
        not_measured "$label" failed "Horovod did not build; log: build.log"
        report
        return
    fi
    # One worker: no gradient hooks (horovod/torch/optimizer.py v0.28.1), so this is plain
    # PyTorch with hvd.init and Horovod's background thread running.
    variant horovod-1-worker-no-hooks 60 --workers horovod --sync-debug
}

case $mode in
    smoke)
        if [[ $stage == all ]]; then
            log "fresh virtual environment: $smoke/venv"
            rm -rf "$smoke/venv"
            # The training environment's interpreter, whose CPU torch build pip finds; no pip
            # of its own yet (ensurepip's would be replaced at once, for 3 s of a CPU).
            "$("$train/bin/python" -c "import sys; print(sys._base_executable)")" -m venv \
                --without-pip "$smoke/venv"
            # The pip, setuptools and wheel the images pin (training/install/image-steps.sh),
            # installed by the training environment's pip (pip --python), then what the GPU
            # image has and this machine's CPU build stands in for, at the training
            # requirements' pins: linked from the training environment, which set-up installed
            # from the same pins (benchmarks/gpu/link_pins.py refuses any other).
            tools=() pins=()
            for name in pip setuptools wheel; do
                tools+=("$name==$(sed -n "s/^${name^^}_VERSION=//p" training/install/image-steps.sh)")
            done
            "$train/bin/python" -m pip --python "$python" install -q "${tools[@]}"
            for name in torch numpy pillow psutil PyYAML cloudpickle packaging; do
                pins+=("$(grep -E "^$name==" training/requirements.txt | cut -d' ' -f1)")
            done
            "$train/bin/python" benchmarks/gpu/link_pins.py \
                "$("$python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" "${pins[@]}"
            version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
            log "carry for CPython $version"
            GPU_CARRY=$carry GPU_PYTHON_VERSION=$version PYTHON=$train/bin/python \
                bash benchmarks/gpu/prep.sh 32 16
        fi ;;
esac
# A smoke run's budget counts from here (its environment stands in for the GPU image).
[[ $mode == gpu ]] || SECONDS=0
[[ -x $python || $mode == gpu ]] || die "no $python: run 'run.sh --smoke $smoke' in full first"
log "stage $stage, $([[ -n $budget ]] && echo "a budget of ${budget}s" || echo "no time budget")"
machine
if [[ $stage == horovod ]]; then
    use_site
    rm -f "$kit/p3.jsonl"
else
    carried_wheels
fi
gpu_libraries
[[ $stage == horovod ]] || measure
[[ $stage == measure ]] || horovod
cat "$results/p3_gpu.md"
if ((failed)); then
    echo "error: a step failed or was skipped (above, and in $results/p3_gpu.md)" >&2
    exit 1
fi
log "$([[ $mode == smoke ]] && echo "smoke run passed" || echo "done") in ${SECONDS}s"
