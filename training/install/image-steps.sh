#!/usr/bin/env bash
# The install steps both GPU training images share: images/tensorflow/Dockerfile and
# images/pytorch/Dockerfile COPY this file and RUN `bash image-steps.sh STEP [ARGS]`, so each
# step and each pin has one home. tests/images reads the steps and runs check-build.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

# nccl-tests for the pre-flight health gate (training/health), a release tag and its commit.
NCCL_TESTS_TAG=v2.19.6
NCCL_TESTS_COMMIT=a0b82b2260cf5152b9f8c061bbf7eaf0ba096432
# perftest's ib_write_bw with CUDA for the gate's GPUDirect RDMA loopback per InfiniBand HCA
# (training/health/ib_write_bw.py, as Azure's node health checks run it), a tag and its commit.
PERFTEST_TAG=26.04.17
PERFTEST_COMMIT=720b61082454e189b1f21835ec175536a944afc3
# pip, and the setuptools and wheel Horovod builds with (--no-build-isolation): the versions
# scripts/setup-training.sh builds the local Horovod with (tests/images checks).
PIP_VERSION=24.3.1
SETUPTOOLS_VERSION=84.2.1
WHEEL_VERSION=0.48.0
# Azure ML's MLflow plug-in: rank 0's metrics (training.metrics) go to the job's run in the
# studio through the `azureml://` tracking URI Azure ML sets in the job. 1.62.0.post6 accepts
# mlflow-skinny<=3.15.0, hence that pin in training/requirements.txt (resolved together with
# protobuf 4.25.9 and numpy 1.26.4 by pip; tests/images checks the pins agree).
AZUREML_MLFLOW_VERSION=1.62.0.post6

# Build stage: compilers, Python headers and Open MPI for Horovod and nccl-tests. No CMake:
# Horovod builds with the PyPI cmake that build_horovod.sh pins (the `horovod` step installs it).
build-packages() {
    apt-get update
    apt-get install -y --no-install-recommends \
        ca-certificates curl g++ git make patch python3-dev python3-venv libopenmpi-dev \
        openmpi-bin
    rm -rf /var/lib/apt/lists/*
}

# Azure's NCCL topology files for the ND sizes (training/nccl_topology: which size takes which;
# docs/architecture.md, "NCCL topology files": why), fetched from Azure/azhpc-images at pinned
# commits and checked by sha256.
nccl-topology() {
    mkdir -p /opt/nccl-topology
    curl -fsSL -o /opt/nccl-topology/ndv4-topo.xml \
        https://raw.githubusercontent.com/Azure/azhpc-images/4a4565a0c0aa9d6944c53420155936061b9c3a98/topology/ndv4-topo.xml
    curl -fsSL -o /opt/nccl-topology/ndv5-topo.xml \
        https://raw.githubusercontent.com/Azure/azhpc-images/d21d11e3e5001bd25f7cec26bee987dcd51b2066/topology/ndv5-topo.xml
    echo "c3583efb0b6e53f52410e32643b46bb6af99f5f34dcebc1868c47c233f84d2cf  /opt/nccl-topology/ndv4-topo.xml" | sha256sum -c -
    echo "c26ff47f1decf03d44ee6e90c4a8afd3bddeec334c5545008f33af2a297e2834  /opt/nccl-topology/ndv5-topo.xml" | sha256sum -c -
}

# nccl-tests (`azdl submit --health-check`, `azdl cluster check`), checked against its commit.
# Two builds, as nccl-tests' README describes: all_reduce_perf (threads, one process over all
# of a node's GPUs: the per-node figure) and all_reduce_perf_mpi (MPI=1, one rank per GPU across
# nodes, started by the job's own mpirun). Both link the devel image's NCCL, the one Horovod is
# built with; its library goes beside the binaries, and the gate puts that folder on
# LD_LIBRARY_PATH for their runs only (the training keeps its framework's NCCL). The CUDA
# runtime is linked statically (CUDARTLIB), kernels for A100 (8.0) and H100/H200 (9.0).
nccl-tests() {
    git clone --quiet --depth 1 --branch "${NCCL_TESTS_TAG}" \
        https://github.com/NVIDIA/nccl-tests.git /tmp/nccl-tests
    test "$(git -C /tmp/nccl-tests rev-parse HEAD)" = "${NCCL_TESTS_COMMIT}"
    for mpi in 0 1; do
        make -C /tmp/nccl-tests -j"$(nproc)" MPI="${mpi}" \
            MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi CUDA_HOME=/usr/local/cuda \
            CUDARTLIB=cudart_static BUILDDIR="/tmp/nccl-tests/build-${mpi}" \
            NVCC_GENCODE="-gencode=arch=compute_80,code=sm_80 -gencode=arch=compute_90,code=sm_90"
    done
    mkdir -p /opt/nccl-tests/bin
    cp /tmp/nccl-tests/build-0/all_reduce_perf /opt/nccl-tests/bin/all_reduce_perf
    cp /tmp/nccl-tests/build-1/all_reduce_perf /opt/nccl-tests/bin/all_reduce_perf_mpi
    cp -L /usr/lib/x86_64-linux-gnu/libnccl.so.2 /opt/nccl-tests/bin/
    rm -rf /tmp/nccl-tests
}

# perftest, checked against its commit, configured with the devel image's cuda.h so that
# `--use_cuda=N` exists (linux-rdma/perftest README, "GPUDirect usage"), installed under
# /opt/perftest. The builder has no GPU driver: libcuda is linked against the toolkit's stub (the
# NVIDIA container runtime mounts the host's driver on the cluster).
perftest() {
    apt-get update
    apt-get install -y --no-install-recommends autoconf automake libtool pkg-config \
        libibverbs-dev librdmacm-dev libibumad-dev libpci-dev
    rm -rf /var/lib/apt/lists/*
    git clone --quiet --depth 1 --branch "${PERFTEST_TAG}" \
        https://github.com/linux-rdma/perftest.git /tmp/perftest
    test "$(git -C /tmp/perftest rev-parse HEAD)" = "${PERFTEST_COMMIT}"
    cd /tmp/perftest
    ./autogen.sh
    ./configure --prefix=/opt/perftest CUDA_H_PATH=/usr/local/cuda/include/cuda.h \
        LDFLAGS="-L/usr/local/cuda/lib64/stubs"
    make -j"$(nproc)"
    make install
    cd /
    rm -rf /tmp/perftest
}

# /opt/venv with the training requirements FILE, less the local CPU framework builds
# (tensorflow-cpu, torch), plus the GPU builds given after it.
requirements() {
    local file=${1:?requirements needs the requirements file}
    shift
    python3 -m venv /opt/venv
    /opt/venv/bin/pip install --no-cache-dir "pip==${PIP_VERSION}" \
        "setuptools==${SETUPTOOLS_VERSION}" "wheel==${WHEEL_VERSION}"
    grep -vE '^(tensorflow-cpu|torch)==' "$file" > /tmp/requirements-image.txt
    /opt/venv/bin/pip install --no-cache-dir "$@" \
        "azureml-mlflow==${AZUREML_MLFLOW_VERSION}" -r /tmp/requirements-image.txt
}

# Horovod (FRAMEWORK: tensorflow or pytorch) with build_horovod.sh and the CMake it pins, the
# script and flags of the local setup, plus NCCL for GPU collectives (linked statically from the devel image's NCCL) and
# kernels for A100 (8.0) and H100 (9.0). The builder has no GPU driver, hence no libcuda.so.1.
# As Horovod's own GPU Dockerfile does, the toolkit's driver stub is on the loader path while
# Horovod builds and while `horovodrun --check-build` loads its framework extension (a library in
# that chain that links libcuda would otherwise fail to load, and the check would report the
# framework missing); the last `ldconfig` takes the stub off again. The run stage starts from a
# fresh base image, and on the cluster the NVIDIA container runtime mounts the host's real driver.
horovod() {
    local framework=${1:?horovod needs the framework: tensorflow or pytorch} flags
    case "$framework" in
        tensorflow) flags="HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITHOUT_PYTORCH=1" ;;
        pytorch) flags="HOROVOD_WITH_PYTORCH=1 HOROVOD_WITHOUT_TENSORFLOW=1" ;;
        *) echo "error: unknown framework '$framework' (tensorflow or pytorch)" >&2; exit 2 ;;
    esac
    /opt/venv/bin/pip install --no-cache-dir \
        "cmake==$(sed -n 's/^CMAKE_VERSION=//p' "$here/build_horovod.sh")"
    ldconfig /usr/local/cuda/targets/x86_64-linux/lib/stubs
    # shellcheck disable=SC2086 # the framework's two flags
    env HOROVOD_GPU_OPERATIONS=NCCL HOROVOD_BUILD_CUDA_CC_LIST=80,90 $flags \
        HOROVOD_WITHOUT_MXNET=1 HOROVOD_WITH_MPI=1 HOROVOD_WITH_GLOO=1 \
        PYTHON=/opt/venv/bin/python bash "$here/build_horovod.sh"
    horovodrun --check-build | tee /tmp/check-build.txt
    check-build /tmp/check-build.txt "$framework"
    ldconfig
}

# Fails unless Horovod's `--check-build` REPORT has the FRAMEWORK, NCCL, MPI and Gloo.
check-build() {
    local report=$1 framework
    case "$2" in
        tensorflow) framework=TensorFlow ;;
        pytorch) framework=PyTorch ;;
        *) echo "error: unknown framework '$2' (tensorflow or pytorch)" >&2; exit 2 ;;
    esac
    for feature in "$framework" NCCL MPI Gloo; do
        grep -q "\[X\] $feature" "$report" || {
            echo "error: Horovod was built without $feature" >&2
            exit 1
        }
    done
}

# Run stage: Python, Open MPI (Azure ML's launcher runs `mpirun` from the image), ssh for mpirun
# across nodes, and the InfiniBand user-space stack (verbs, the mlx5 provider, RDMA CM) that
# NCCL and Open MPI/UCX use on the InfiniBand VM sizes. The libraries themselves (libopenmpi3,
# libibverbs1, librdmacm1) come in as dependencies, under each Ubuntu release's own names.
run-packages() {
    apt-get update
    apt-get install -y --no-install-recommends \
        python3 openmpi-bin openssh-client \
        rdma-core ibverbs-providers ibverbs-utils rdmacm-utils libibumad3 libpci3
    rm -rf /var/lib/apt/lists/*
}

steps=" build-packages nccl-topology nccl-tests perftest requirements horovod check-build run-packages "
if [ $# -eq 0 ] || [[ "$steps" != *" $1 "* ]]; then
    echo "error: unknown step '${1:-}'; allowed:${steps% }" >&2
    exit 2
fi
"$@"
