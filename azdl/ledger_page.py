"""`azdl jobs report --html`: one self-contained HTML page of a job's ledger, to paste into a
review. Its figures are `azdl.ledger.document`'s (the table's numbers, the bar's segments), its
throughput the events' step batches (azdl.pace), its loss curve the epochs' metrics
(azdl.epochs); the plots are matplotlib PNGs embedded as base64 data URIs, so the page loads
nothing from anywhere and needs no script."""

import base64
import html
import io
from dataclasses import dataclass

from azdl.epochs import Epoch, epochs
from azdl.ledger import BUCKETS, LABELS
from azdl.pace import Pace, paces

NO_LOSS = ("No epoch ended in the run's events, so no loss to draw (a user's script reports its "
           "epochs with training.events.epoch).")  # fmt: skip
# The curves drawn, where the epochs have them (the flavours' names; validation's when run).
LOSSES = ("loss", "val_loss")
COLORS = {"productive": "#2a9d4b", "recomputed": "#d1495b", "restore": "#edae49",
          "checkpoint": "#00798c", "startup": "#7d8597", "idle": "#3d3d3d"}  # fmt: skip


@dataclass(frozen=True)
class Retry:
    name: str
    status: str
    verdict: str  # azdl.jobs.retry.classify's reason, or what the attempt is doing


def segments(doc: dict) -> list[tuple[str, float]]:
    """The bar's segments, in BUCKETS order: (bucket, GPU-hours), or node-hours when the nodes
    have no GPU (a local run)."""
    unit = "gpu_hours" if doc["gpus_per_node"] else "node_hours"
    return [(bucket, doc["buckets"][bucket][unit]) for bucket in BUCKETS]


def _png(fig) -> str:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", metadata={"Software": None})
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def bar_png(doc: dict) -> str:
    from matplotlib.figure import Figure  # here: the other commands do not load matplotlib

    unit = "GPU-hours" if doc["gpus_per_node"] else "node-hours"  # as `segments` measures
    fig = Figure(figsize=(8, 1.6), dpi=110)
    ax = fig.add_subplot()
    left = 0.0
    for bucket, hours in segments(doc):
        ax.barh([0], [hours], left=left, color=COLORS[bucket], label=LABELS[bucket])
        left += hours
    ax.set_yticks([])
    ax.set_xlabel(unit)
    ax.legend(ncol=6, fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), frameon=False)
    fig.tight_layout()
    return _png(fig)


def pace_png(paces: list[Pace], start_ms: int) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.2), dpi=110)
    ax = fig.add_subplot()
    samples = any(p.samples_per_s for p in paces)
    for attempt in dict.fromkeys(p.attempt for p in paces):
        mine = [p for p in paces if p.attempt == attempt]
        xs = [(p.t_ms - start_ms) / 60_000 for p in mine]
        ax.plot(xs, [p.samples_per_s if samples else p.steps_per_s for p in mine], ".-",
                label=attempt)  # fmt: skip
    ax.set_xlabel("minutes since the first attempt started")
    ax.set_ylabel("images/s" if samples else "steps/s")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _png(fig)


def loss_png(found: list[Epoch], start_ms: int) -> str:
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 3.2), dpi=110)
    ax = fig.add_subplot()
    for attempt in dict.fromkeys(e.attempt for e in found):
        for name in LOSSES:
            mine = [e for e in found if e.attempt == attempt and name in e.values]
            if mine:
                xs = [(e.t_ms - start_ms) / 60_000 for e in mine]
                ax.plot(xs, [e.values[name] for e in mine], ".-", label=f"{attempt} {name}")
    ax.set_xlabel("minutes since the first attempt started")
    ax.set_ylabel("loss (epoch mean)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return _png(fig)


def _cell(value) -> str:
    return "–" if value is None else html.escape(str(value))


def page(title: str, doc: dict, found: list[dict], retries: list[Retry]) -> str:
    """The HTML page of the ledger `doc` and its events `found`: the ledger as a bar and a
    table, throughput and loss over time, the attempts and their verdicts."""
    e = html.escape
    batches, ended = paces(found), [x for x in epochs(found) if set(LOSSES) & set(x.values)]
    rows = []
    for bucket in (*BUCKETS, "billed"):
        figures = doc["billed"] if bucket == "billed" else doc["buckets"][bucket]
        name = "billed total" if bucket == "billed" else LABELS[bucket]
        cells = [figures["node_ms"], figures["node_hours"], figures["gpu_hours"], figures["usd"]]
        rows.append(f'<tr data-bucket="{bucket}"><th>{e(name)}</th>'
                    + "".join(f"<td>{_cell(c)}</td>" for c in cells) + "</tr>")  # fmt: skip
    unit = "GPU-hours" if doc["gpus_per_node"] else "node-hours"
    bar_alt = f"{unit} per bucket: " + "; ".join(f"{LABELS[b]} {h}" for b, h in segments(doc))
    start = min((a["start_ms"] for a in doc["attempts"]), default=0)
    if batches:
        unit = "images/s" if any(p.samples_per_s for p in batches) else "steps/s"
        pace = f'<img alt="{unit} over time" src="{pace_png(batches, start)}">'
    else:
        pace = "<p>No step batches in the events: no throughput to draw.</p>"
    if ended:
        last = "; ".join(
            f"{x.attempt} epoch {x.number}: "
            + ", ".join(f"{k} {x.values[k]:.4g}" for k in LOSSES if k in x.values)
            for x in ended[-3:]
        )
        png = loss_png(ended, start)
        loss = f'<img id="loss" alt="loss per epoch; last: {e(last)}" src="{png}">'
    else:
        loss = f"<p>{e(NO_LOSS)}</p>"
    attempts = "".join(
        f"<tr><td>{e(r.name)}</td><td>{e(r.status)}</td><td>{e(r.verdict)}</td></tr>"
        for r in retries
    )
    goodput = doc["goodput_percent"]
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{e(title)}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:1em auto}}
table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2em .5em;text-align:right}}
td:last-child{{text-align:left}}img{{max-width:100%}}</style></head><body>
<h1>{e(title)}</h1>
<p id="goodput">goodput: <b>{_cell(goodput)}</b> % of {_cell(doc["billed"]["node_hours"])}
node-hours billed; queued {doc["queue_ms"] / 1000:.0f} s (not billed); last step
{_cell(doc["last_step"])}; steps recomputed: {doc["recomputed_steps"]}</p>
<h2>The ledger</h2>
<img id="bar" alt="{e(bar_alt)}" src="{bar_png(doc)}">
<table id="ledger"><tr><th>bucket</th><th>node-ms</th><th>node-hours</th><th>GPU-hours</th>
<th>USD</th></tr>
{chr(10).join(rows)}
</table>
<p>{doc["gpus_per_node"]} GPUs per node; {_cell(doc["usd_per_node_hour"])} USD per node-hour.</p>
<h2>Throughput</h2>
{pace}
<h2>Loss</h2>
{loss}
<h2>Attempts</h2>
<table id="attempts"><tr><th>job</th><th>status</th><th>verdict</th></tr>{attempts}</table>
</body></html>
"""
