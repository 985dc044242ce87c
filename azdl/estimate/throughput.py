"""Images/s of a VM size at a node count, and where the figure comes from. The order of
preference and the communication model: docs/estimate.md ("Where the throughput comes from")."""

import json
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from azdl import project
from azdl.errors import AzdlError
from azdl.estimate.workload import Model
from azdl.jobs.report import SCHEMA as BENCH_SCHEMA
from azdl.paths import existing_file
from infra.catalogue import VmSize
from infra.nccl_baselines import baseline

PUBLISHED_FILE = Path(__file__).with_name("published.yaml")
# Where benchmarks/gpu/run.sh writes its results, in the project (azdl.project), not beside the
# installed package.
GPU_KIT_RESULTS = Path("benchmarks") / "results" / "p3_gpu.json"
DEFAULT_OVERLAP = 0.5
DEFAULT_BATCH_PER_GPU = 256  # NVIDIA's ResNet50 v1.5 recipe (DeepLearningExamples configs.yml)
PUBLISHED = "published, not measured here"
MODELLED = "modelled, not measured here"
LABELS = {"published": PUBLISHED, "modelled": MODELLED}

# GPU names as torch.cuda.get_device_name prints them -> the catalogue's gpu_model.
DEVICE_MODELS = (
    ("H200", "H200 SXM"),
    ("H100 NVL", "H100 NVL"),
    ("H100 80GB HBM3", "H100 SXM"),
    ("A100-SXM4", "A100 SXM"),
    ("A100 80GB PCIe", "A100 PCIe"),
)


@dataclass(frozen=True)
class Reference:
    """A per-GPU rate measured (or published, or given) on `gpus` GPUs of a run."""

    per_gpu: float
    gpus: int
    kind: str  # "measured", "published", "modelled", "override"
    source: str
    batch_per_gpu: int | None = None


@dataclass(frozen=True)
class Rate:
    images_per_sec: float | None  # None: no figure (then `source` says why)
    kind: str  # "measured", "model", "published", "modelled", "override", "none"
    source: str  # the whole provenance
    short: str = ""  # a table cell's worth of it


@dataclass
class Inputs:
    """Everything the throughput of an option is computed from."""

    # (vm size, model) -> {nodes: (images/s, GPUs, job, images per GPU per step)}, and the file
    bench: dict[tuple[str, str], dict[int, tuple[float, int, str, int | None]]] = field(
        default_factory=dict
    )
    bench_files: dict[tuple[str, str], str] = field(default_factory=dict)
    gpu_kit: dict[tuple[str, str], Reference] = field(default_factory=dict)  # (gpu model, model)
    published: dict[str, list[dict]] = field(default_factory=dict)
    per_gpu_rate: float | None = None
    efficiency: float | None = None
    overlap: float = DEFAULT_OVERLAP
    batch_per_gpu: int | None = None

    @property
    def overridden(self) -> bool:
        return self.per_gpu_rate is not None or self.efficiency is not None


def read_bench(path: Path, inputs: Inputs) -> None:
    """Add the counted runs of an `azdl bench` results.json to `inputs`."""
    text = existing_file(path, "--bench", "`azdl bench`'s results.json").read_text()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AzdlError(f"--bench {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != BENCH_SCHEMA:
        raise AzdlError(f"--bench {path}: not an `azdl bench` results.json ({BENCH_SCHEMA})")
    size = doc.get("vm_size")
    if not size:
        raise AzdlError(
            f"--bench {path}: names no vm_size (a --local bench, or one older than this "
            "field); only cluster benches feed the estimate"
        )
    counted = [r for r in doc.get("runs", []) if r.get("counted")]
    if not counted:
        raise AzdlError(f"--bench {path}: no completed run with a throughput figure in it")
    for run in counted:
        record = run["record"]
        key = (size, record["model"])
        batch = record.get("batch_per_worker")
        inputs.bench.setdefault(key, {})[run["nodes"]] = (
            float(run["images_per_sec"]),
            int(run["workers"]),
            run["job"],
            batch * record.get("grad_accum", 1) if batch else None,
        )
        inputs.bench_files[key] = str(path)


def gpu_model_of(device: str) -> str | None:
    return next((model for name, model in DEVICE_MODELS if name in device), None)


def read_gpu_kit(path: Path, inputs: Inputs) -> None:
    """The single-GPU synthetic rate of the GPU kit's results (benchmarks/gpu, p3_gpu.json)."""
    text = existing_file(path, "--gpu-results", "the GPU kit's p3_gpu.json").read_text()
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise AzdlError(f"--gpu-results {path}: not JSON ({exc})") from None
    rows = [r for r in doc.get("rows", []) if r.get("data") == "synthetic" and r.get("model")]
    if doc.get("benchmark") != "p3_gpu" or not rows:
        raise AzdlError(
            f"GPU kit results {path}: expected the kit's p3_gpu.json with a synthetic row that "
            "names its model"
        )
    gpu = gpu_model_of(str(doc.get("device", "")))
    if gpu is None:
        raise AzdlError(
            f"GPU kit results {path}: measured on {doc.get('device')!r}, a GPU of no catalogue "
            f"size (known: {', '.join(n for n, _ in DEVICE_MODELS)})"
        )
    best = max(rows, key=lambda r: r["images_per_sec"])
    inputs.gpu_kit[(gpu, best["model"])] = Reference(
        best["images_per_sec"],
        1,
        "measured",
        f"GPU kit {path} ({doc['device']}, {best['precision']}, batch {best['batch']}, "
        f"{doc['date']})",
        best["batch"],
    )


def read_project_gpu_kit(inputs: Inputs) -> str | None:
    """Add the project's GPU kit results (GPU_KIT_RESULTS, where the kit writes them) to
    `inputs`; nothing outside a project or where the kit has not run. A file it cannot use is
    not fatal: the note saying so."""
    try:
        path = project.root() / GPU_KIT_RESULTS
    except AzdlError:
        return None
    if not path.is_file():
        return None
    try:
        read_gpu_kit(path, inputs)
    except AzdlError as exc:
        return f"{exc}; not used (--gpu-results FILE names another)"
    return None


def read_published(path: Path = PUBLISHED_FILE) -> dict[str, list[dict]]:
    """The rates by VM size, each with its `kind`: "published", or "modelled" for a row
    `scaled_from` another size's published row (same model and GPUs), whose figure it gets here
    as that row's × `scale`, with both sources."""
    raw = yaml.safe_load(Path(path).read_text())
    rates = {}
    for size, rows in raw.items():
        rates[size] = []
        for row in rows:
            if "scaled_from" not in row:
                rates[size].append(row | {"kind": "published"})
                continue
            base = next(
                (b for b in raw.get(row["scaled_from"], []) if "scaled_from" not in b
                 and (b["model"], b["gpus"]) == (row["model"], row["gpus"])),
                None,
            )  # fmt: skip
            if base is None:
                raise AzdlError(
                    f"{path}: {size} is scaled from {row['scaled_from']}, which publishes no "
                    f"{row['model']} rate on {row['gpus']} GPU(s)"
                )
            rates[size].append(row | {
                "kind": "modelled",
                "images_per_sec": round(base["images_per_sec"] * row["scale"]),
                "source": f"{base['images_per_sec']:,} images/s {PUBLISHED} ({base['system']}, "
                f"{base['source']}) × {row['scale']:g}: {row['source']}",
            })  # fmt: skip
    return rates


def bus_bandwidth(size: VmSize, gpus: int) -> tuple[float, str] | None:
    """The published all-reduce bus bandwidth (GB/s) for a job of `gpus` GPUs of `size`."""
    base = baseline(size.name)
    level = None
    if base is not None:
        level = base.single_node if gpus <= size.gpus else base.multi_node
    if level is None:
        return None
    scope = "single-node" if gpus <= size.gpus else "multi-node"
    return level.expected_gbps, f"{scope} NCCL busbw {level.expected_gbps:g} GB/s ({level.source})"


def ring_allreduce_seconds(gradient_bytes: float, gpus: int, busbw_gbps: float) -> float:
    """Time of a ring all-reduce of `gradient_bytes` over `gpus` GPUs at a bus bandwidth: the
    bus bandwidth already counts the ring's 2 (N - 1) / N factor (nccl-tests' definition)."""
    if gpus <= 1:
        return 0.0
    return 2 * (gpus - 1) / gpus * gradient_bytes / (busbw_gbps * 1e9)


def modeled(
    ref: Reference, size: VmSize, nodes: int, model: Model, inputs: Inputs
) -> tuple[float, str] | str:
    """(images/s, how) from the communication model, or why it cannot be applied."""
    gpus = nodes * size.gpus
    batch = inputs.batch_per_gpu or ref.batch_per_gpu or DEFAULT_BATCH_PER_GPU
    exposed = 1 - inputs.overlap
    t_ref = batch / ref.per_gpu
    comm_ref = 0.0
    if ref.gpus > 1:
        at_ref = bus_bandwidth(size, ref.gpus)
        if at_ref is None:
            return f"no published NCCL bus bandwidth for {size.name} at {ref.gpus} GPUs"
        comm_ref = ring_allreduce_seconds(model.gradient_bytes, ref.gpus, at_ref[0])
    at_n = bus_bandwidth(size, gpus)
    if gpus > 1 and at_n is None:
        scope = "multi-node" if gpus > size.gpus else "single-node"
        return (
            f"no published {scope} NCCL bus bandwidth for {size.name} "
            "(infra/nccl_baselines.yaml): give --efficiency"
        )
    compute = t_ref - exposed * comm_ref
    if compute <= 0:
        return (
            f"the reference's own all-reduce ({comm_ref:.4f} s) is longer than its step at batch "
            f"{batch}/GPU: the model does not fit it; give --efficiency"
        )
    comm = ring_allreduce_seconds(model.gradient_bytes, gpus, at_n[0]) if gpus > 1 else 0.0
    step = compute + exposed * comm
    rate = gpus * batch / step
    linear = gpus * ref.per_gpu
    how = (
        f"{ref.per_gpu:,.0f}/GPU ({ref.source}) × {gpus} GPUs, ring all-reduce of "
        f"{model.gradient_bytes / 1e6:.1f} MB"
        + (f" at {at_n[1]}" if gpus > 1 else "")
        + f", overlap {inputs.overlap:g}, batch {batch}/GPU: {rate / linear:.1%} of linear"
    )
    return rate, how


def reference(size: VmSize, model: Model, inputs: Inputs) -> Reference | None:
    """The per-GPU rate the model scales from, in the order of preference."""
    if inputs.per_gpu_rate is not None:
        return Reference(
            inputs.per_gpu_rate, 1, "override", f"--per-gpu-rate {inputs.per_gpu_rate:g}"
        )
    runs = inputs.bench.get((size.name, model.name))
    if runs:
        nodes = min(runs)
        ips, workers, job, batch = runs[nodes]
        where = inputs.bench_files[(size.name, model.name)]
        return Reference(
            ips / workers, workers, "measured", f"azdl bench {where}, job {job}", batch
        )
    kit = inputs.gpu_kit.get((size.gpu_model, model.name))
    if kit is not None:
        return kit
    rows = [r for r in inputs.published.get(size.name, []) if r["model"] == model.name]
    if rows:
        row = min(rows, key=lambda r: r["gpus"])
        return Reference(
            row["images_per_sec"] / row["gpus"],
            row["gpus"],
            row["kind"],
            f"{LABELS[row['kind']]}: {row['system']}, {row['source']}",
            row.get("batch_per_gpu"),
        )
    return None


def throughput(size: VmSize, nodes: int, model: Model, inputs: Inputs) -> Rate:
    gpus = nodes * size.gpus
    if not inputs.overridden:
        measured = inputs.bench.get((size.name, model.name), {}).get(nodes)
        if measured:
            where = inputs.bench_files[(size.name, model.name)]
            return Rate(
                measured[0],
                "measured",
                f"measured: azdl bench {where}, job {measured[2]}",
                f"measured (azdl bench, {nodes} node{'s' if nodes > 1 else ''})",
            )
    ref = reference(size, model, inputs)
    if ref is None:
        why = (
            f"no bench results, GPU-kit rate or published rate for {model.name} on "
            f"{size.name}: give --per-gpu-rate (and --efficiency)"
        )
        return Rate(None, "none", why, why)
    if inputs.efficiency is not None:
        scale = inputs.efficiency if nodes > 1 else 1.0
        how = f"{ref.per_gpu:,.0f}/GPU ({ref.source}) × {gpus} GPUs"
        if nodes > 1:
            how += f" × --efficiency {inputs.efficiency:g}"
        short = f"override: {ref.per_gpu:,.0f}/GPU × {gpus}" + (
            f" × {inputs.efficiency:g}" if nodes > 1 else ""
        )
        return Rate(ref.per_gpu * gpus * scale, "override", f"override: {how}", short)
    if ref.kind in LABELS:
        row = next(
            (
                r
                for r in inputs.published.get(size.name, [])
                if r["model"] == model.name and r["gpus"] == gpus
            ),
            None,
        )
        if row is not None:
            label = LABELS[row["kind"]]
            return Rate(
                float(row["images_per_sec"]),
                row["kind"],
                f"{label}: {row['system']}, {row['source']}",
                f"{label} ({row['system']})",
            )
    result = modeled(ref, size, nodes, model, inputs)
    if isinstance(result, str):
        return Rate(None, "none", result, result)
    origin = {"override": "--per-gpu-rate", "published": f"rate {PUBLISHED}",
              "modelled": f"rate {MODELLED}", "measured": "measured rate"}[ref.kind]  # fmt: skip
    linear = result[0] / (gpus * ref.per_gpu)
    short = f"model ({linear:.1%} of linear) from a {ref.gpus}-GPU {origin}"
    return Rate(result[0], "model", f"model from a {origin}: {result[1]}", short)
