"""nccl-tests in the GPU images, checked statically (no Docker engine here): pinned to a release
tag and its commit, built twice as nccl-tests' README describes (threads; MPI=1 with MPI_HOME),
and copied to the run stage under the names and folder the health gate runs."""

import re

import pytest

from tests.images.dockerfiles import FRAMEWORKS, executed, shared_pins, stages
from training.health.gate import BIN_DIR

# NVIDIA/nccl-tests: tag v2.19.6 is commit a0b82b2260cf5152b9f8c061bbf7eaf0ba096432 (2026-07-09).
TAG, COMMIT = "v2.19.6", "a0b82b2260cf5152b9f8c061bbf7eaf0ba096432"


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_nccl_tests_is_pinned_by_tag_and_checked_against_its_commit(framework):
    pins = shared_pins()  # training/install/image-steps.sh, which both images run
    assert (pins["NCCL_TESTS_TAG"], pins["NCCL_TESTS_COMMIT"]) == (TAG, COMMIT)
    build = executed(stages(framework)[0])
    assert '--branch "${NCCL_TESTS_TAG}"' in build
    assert 'test "$(git -C /tmp/nccl-tests rev-parse HEAD)" = "${NCCL_TESTS_COMMIT}"' in build


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_both_builds_are_made_and_land_where_the_gate_runs_them(framework):
    build, run = stages(framework)[0], stages(framework)[-1]
    text = executed(build)
    assert re.search(r"for mpi in 0 1; do\s.*MPI=\"\$\{mpi\}\".*MPI_HOME=\S+openmpi", text, re.S)
    assert re.search(r"apt-get install[^&]* git ", text)  # the build stage can clone
    assert f"cp /tmp/nccl-tests/build-0/all_reduce_perf {BIN_DIR}/all_reduce_perf" in text
    assert f"cp /tmp/nccl-tests/build-1/all_reduce_perf {BIN_DIR}/all_reduce_perf_mpi" in text
    assert f"cp -L /usr/lib/x86_64-linux-gnu/libnccl.so.2 {BIN_DIR}/" in text
    copies = [i["value"] for i in run if i["instruction"] == "COPY"]
    assert f"--from=build {BIN_DIR} {BIN_DIR}" in copies


# linux-rdma/perftest: tag 26.04.17 is commit 720b61082454e189b1f21835ec175536a944afc3
# (2026-05-31; read from the repository's tags).
PERFTEST_TAG, PERFTEST_COMMIT = "26.04.17", "720b61082454e189b1f21835ec175536a944afc3"


@pytest.mark.parametrize("framework", sorted(FRAMEWORKS))
def test_perftest_is_pinned_built_with_cuda_and_lands_where_the_gate_runs_it(framework):
    from training.health.gate import PERFTEST_DIR

    pins = shared_pins()
    assert (pins["PERFTEST_TAG"], pins["PERFTEST_COMMIT"]) == (PERFTEST_TAG, PERFTEST_COMMIT)
    build, run = stages(framework)[0], stages(framework)[-1]
    text = executed(build)
    assert 'test "$(git -C /tmp/perftest rev-parse HEAD)" = "${PERFTEST_COMMIT}"' in text
    # --use_cuda exists only in a build configured with cuda.h (perftest README, GPUDirect usage)
    assert "CUDA_H_PATH=/usr/local/cuda/include/cuda.h" in text
    assert "--prefix=/opt/perftest" in text and PERFTEST_DIR == "/opt/perftest/bin"
    copies = [i["value"] for i in run if i["instruction"] == "COPY"]
    assert "--from=build /opt/perftest /opt/perftest" in copies
    assert re.search(r"apt-get install[^&]*libibumad3 libpci3", executed(run))  # its libraries
