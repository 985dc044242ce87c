"""P3's results file from the runs' JSON lines: benchmarks/results/p3_gpu.{md,json}.

    python3 benchmarks/gpu/p3_report.py p3.jsonl --command "bash benchmarks/gpu/run.sh ..."

run.sh calls it after every variant, so the file always holds what has run so far. A line
`{"label": ..., "failed": why}` is a variant that produced no result: listed as failed. The
last line of a label counts. Targets: synthetic ≥ 3,000 images/s on one H100 (stretch
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


def build(all_rows: list[dict], command: str, smoke: bool = False) -> tuple[dict, str]:
    latest = {row["label"]: row for row in all_rows}  # a label run again: its last result
    rows = [r for r in latest.values() if "failed" not in r]
    failed = [r for r in latest.values() if "failed" in r]
    if not rows:
        raise SystemExit("error: no P3 run produced a result; see the run logs")
    base = next((r for r in rows if r["label"] == "synthetic"), None)
    for row in rows:
        row["vs_synthetic"] = row["images_per_sec"] / base["images_per_sec"] if base else None
    report = {
        "benchmark": "p3_gpu_smoke" if smoke else "p3_gpu",
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "device": rows[0]["device"],
        "host": platform.node(),
        "torch": rows[0]["torch"],
        "command": command,
        "rows": rows,
        "failed": failed,
    }
    first = rows[0]
    lines = [
        f"P3, {first['model']} {first['image_size']} px, batch {first['batch']}, "
        f"{first['precision']}, one {report['device']}; torch {report['torch']}; "
        f"{report['date']}.",
        "",
        f"`{command}`",
        "",
    ]
    if smoke:
        lines[0:0] = [
            "SMOKE RUN on CPU (tiny model, 2 steps, CPU decode): it checks that the kit builds "
            "Horovod and runs every variant; it measures nothing.",
            "",
        ]
    lines += [
        "| run | Horovod | weights NHWC | compile | images/s | vs synthetic | kernel time |",
        "| --- | --- | --- | --- | ---: | ---: | ---: |",
    ]
    for r in rows:
        share = "–" if r["kernel_time_share"] is None else f"{r['kernel_time_share']:.0%}"
        ratio = "–" if r["vs_synthetic"] is None else f"{r['vs_synthetic']:.2f}×"
        lines.append(
            f"| {r['label']} | {'yes' if r['horovod'] else 'no'} | "
            f"{'yes' if r['weights_channels_last'] else 'no'} | {'yes' if r['compile'] else 'no'} "
            f"| {r['images_per_sec']:,.0f} | {ratio} | {share} |"
        )
    for r in failed:
        lines.append(f"| {r['label']} | FAILED: {r['failed']} | | | | | |")
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
    args = p.parse_args(argv)
    rows = [json.loads(line) for line in args.jsonl.read_text().splitlines() if line.strip()]
    report, md = build(rows, args.command, args.smoke)
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "p3_gpu.json").write_text(json.dumps(report, indent=2) + "\n")
    (args.results / "p3_gpu.md").write_text(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
