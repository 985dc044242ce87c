"""P3's results file from the runs' JSON lines: benchmarks/results/p3_gpu.{md,json}.

    python3 benchmarks/gpu/p3_report.py p3.jsonl --command "bash benchmarks/gpu/run.sh ..."

run.sh calls it after every step, so the file always holds what has run so far. A line
`{"label": ..., "failed": why}` or `{"label": ..., "skipped": why}` (the time budget left too
little) is a step that produced no result: listed as such; so is `{"label": ..., "gpu_only":
why}`, a variant the CPU rehearsal does not run. The last line of a label counts.
Targets: synthetic ≥ 3,000 images/s on one H100 (stretch
4,000); real data ≥ 0.9× the synthetic rate. Ratios are against the synthetic row of the same
session. `--smoke`: the CPU rehearsal (run.sh --smoke), labelled as such, with no verdicts.
"""

import argparse
import datetime
import json
import platform
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "results"
SYNTHETIC_TARGET, SYNTHETIC_STRETCH, REAL_SHARE = 3000, 4000, 0.9


WORKERS = {
    "one": "one process",
    "ddp": "DDP, world of 1",
    # horovod/torch/optimizer.py v0.28.1 registers gradient hooks only with more than 1 worker.
    "horovod": "Horovod, 1 worker: no hooks, plain PyTorch under hvd.init",
}


def _compiled(row: dict) -> str:
    """The compile column: no, yes, or yes with PyTorch's backend override in force."""
    if not row["compile"]:
        return "no"
    return f"yes, backends {row['backend_override']}" if row["backend_override"] else "yes"


def build(
    all_rows: list[dict], command: str, smoke: bool = False, budget: int | None = None
) -> tuple[dict, str]:
    latest = {row["label"]: row for row in all_rows}  # a label run again: its last result
    rows = [r for r in latest.values() if "images_per_sec" in r]
    failed = [r for r in latest.values() if "failed" in r]
    skipped = [r for r in latest.values() if "skipped" in r]
    gpu_only = [r for r in latest.values() if "gpu_only" in r]
    base = next((r for r in rows if r["label"] == "synthetic"), None)
    for row in rows:
        row["vs_synthetic"] = row["images_per_sec"] / base["images_per_sec"] if base else None
    first = rows[0] if rows else {}
    report = {
        "benchmark": "p3_gpu_smoke" if smoke else "p3_gpu",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": first.get("device"),
        "host": platform.node(),
        "torch": first.get("torch"),
        "command": command,
        "budget_s": budget,
        "rows": rows,
        "failed": failed,
        "skipped": skipped,
        "gpu_only": gpu_only,
    }
    lines = [
        f"P3, one {report['device']}; torch {report['torch']}; {report['date']}"
        + (f"; a budget of {budget} s." if budget else "."),
        "",
        f"`{command}`",
        "",
    ]
    if not rows:
        lines[0] = f"P3: nothing measured; {report['date']}."
    if smoke:
        lines[0:0] = [
            "SMOKE RUN on CPU (tiny model, 2 steps, CPU decode, no sync check, torch.compile "
            "generating no kernels): it checks that "
            "the kit runs every step, Horovod's included; it measures nothing.",
            "",
        ]
    lines += [
        "| run | workers | model, px, batch | precision | NHWC | compile | no host sync "
        "checked | images/s | vs synthetic | kernel time |",
        "| --- | --- | --- | --- | --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        share = "–" if r["kernel_time_share"] is None else f"{r['kernel_time_share']:.0%}"
        ratio = "–" if r["vs_synthetic"] is None else f"{r['vs_synthetic']:.2f}×"
        layout = "images + weights" if r["weights_channels_last"] else "images"
        lines.append(
            f"| {r['label']} | {WORKERS[r['workers']]} | "
            f"{r['model']}, {r['image_size']}, {r['batch']} | {r['precision']} | "
            f"{layout if r['channels_last'] else 'no'} | {_compiled(r)} | "
            f"{'yes' if r['sync_debug'] else 'no'} | {r['images_per_sec']:,.0f} | {ratio} | "
            f"{share} |"
        )
    for r in failed:
        lines.append(f"| {r['label']} | FAILED: {r['failed']} | | | | | | | | |")
    for r in skipped:
        lines.append(f"| {r['label']} | SKIPPED: {r['skipped']} | | | | | | | | |")
    for r in gpu_only:
        lines.append(f"| {r['label']} | GPU ONLY: {r['gpu_only']} | | | | | | | | |")
    if base and not smoke:
        rate = base["images_per_sec"]
        verdict = (
            "stretch met"
            if rate >= SYNTHETIC_STRETCH
            else ("met" if rate >= SYNTHETIC_TARGET else "NOT met")
        )
        lines += [
            "",
            f"Synthetic target ≥ {SYNTHETIC_TARGET:,} images/s (stretch "
            f"{SYNTHETIC_STRETCH:,}): {rate:,.0f}, {verdict}.",
        ]
        for r in rows:
            if r["data"] == "real":
                ok = "met" if r["vs_synthetic"] >= REAL_SHARE else "NOT met"
                lines.append(
                    f"Real data ({r['label']}) target ≥ {REAL_SHARE}× synthetic: "
                    f"{r['vs_synthetic']:.2f}×, {ok}."
                )
    return report, "\n".join(lines) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("jsonl", type=Path)
    p.add_argument("--command", required=True, help="the command that ran the benchmark")
    p.add_argument("--results", type=Path, default=RESULTS, help="where p3_gpu.* go")
    p.add_argument("--smoke", action="store_true", help="a CPU rehearsal: no verdicts")
    p.add_argument("--budget", type=int, help="the run's time budget, seconds")
    args = p.parse_args(argv)
    rows = [json.loads(line) for line in args.jsonl.read_text().splitlines() if line.strip()]
    report, md = build(rows, args.command, args.smoke, args.budget)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "p3_gpu.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.results / "p3_gpu.md").write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
