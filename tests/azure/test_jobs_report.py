"""`azdl jobs report --html` on a job and its retry (tests/azure/ledger_workspace.py): the page
is read back with html.parser, and its figures must be `azdl jobs ledger --json`'s
(azdl.ledger.document), its images embedded, its verdicts azdl.jobs.retry's."""

import base64
import json
from html.parser import HTMLParser

import pytest

from azdl.cli import main
from azdl.ledger import BUCKETS
from tests.azure.ledger_workspace import serve


class Page(HTMLParser):
    """The page's tables (by id: rows of cells, each row's data-bucket), images and links."""

    def __init__(self):
        super().__init__()
        self.tables, self.images, self.urls = {}, [], []
        self.table = self.row = self.cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.urls += [v for k, v in attrs.items() if k in ("src", "href") and v]
        if tag == "img":
            self.images.append(attrs)
        elif tag == "table":
            self.table = self.tables.setdefault(attrs["id"], [])
        elif tag == "tr":
            self.row = {"bucket": attrs.get("data-bucket"), "cells": []}
            self.table.append(self.row)
        elif tag in ("td", "th"):
            self.cell = ""

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.row["cells"].append(self.cell)
            self.cell = None


@pytest.fixture
def workspace(ml_client, outputs_storage):
    serve(ml_client.return_value, outputs_storage, lambda: 400)  # both attempts have ended
    return ml_client.return_value


def test_the_page_carries_the_ledgers_figures(workspace, outputs_file, tmp_path, capsys):
    out = tmp_path / "r1.html"
    argv = ["r1-retry1", "--outputs", str(outputs_file())]
    assert main(["jobs", "report", *argv, "--html", "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    assert main(["jobs", "ledger", *argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    text = out.read_text()
    page = Page()
    page.feed(text)
    table = {row["bucket"]: row["cells"][1:] for row in page.tables["ledger"] if row["bucket"]}
    assert list(table) == [*BUCKETS, "billed"]
    for bucket, cells in table.items():
        figures = doc["billed"] if bucket == "billed" else doc["buckets"][bucket]
        keys = ("node_ms", "node_hours", "gpu_hours", "usd")
        assert [float(c) for c in cells] == [figures[k] for k in keys], bucket
    assert doc["buckets"]["productive"]["node_ms"] == 140_000  # tests/azure/test_jobs_ledger.py
    # The bar is drawn from these segments, in the buckets' order, in GPU-hours.
    bar = next(i for i in page.images if i.get("id") == "bar")
    unit, parts = bar["alt"].split(": ", 1)
    assert unit == "GPU-hours per bucket"
    drawn = [part.rsplit(" ", 1) for part in parts.split("; ")]
    assert [float(h) for _, h in drawn] == [doc["buckets"][b]["gpu_hours"] for b in BUCKETS]
    assert f"goodput: <b>{doc['goodput_percent']}</b> %" in text
    # Self-contained: every image a PNG in a data URI, no address to load anything from.
    assert "http://" not in text and "https://" not in text and "<script" not in text
    pngs = [base64.b64decode(i["src"].removeprefix("data:image/png;base64,")) for i in page.images]
    assert len(pngs) == 3 and all(png.startswith(b"\x89PNG\r\n\x1a\n") for png in pngs)
    assert [i["alt"] for i in page.images][1] == "images/s over time"
    # The loss curve: every epoch's, its last three named (the events' epochs, ledger_workspace).
    loss = next(i for i in page.images if i.get("id") == "loss")
    assert loss["alt"] == ("loss per epoch; last: r1 epoch 1: loss 2.31; r1-retry1 epoch 2: loss "
                           "1.94; r1-retry1 epoch 3: loss 1.62, val_loss 1.7")  # fmt: skip
    assert [row["cells"] for row in page.tables["attempts"][1:]] == [
        ["r1", "Failed", "a node was pre-empted"],
        ["r1-retry1", "Completed", "completed"],
    ]


def test_the_page_of_a_local_run(tmp_path, capsys):
    """`--events-dir`: the folder `azdl train` writes (its attempts beside the events, as
    azdl.local_ledger records them), one node, no price: the bar in node-hours."""
    from azdl import ledger, local_ledger
    from tests.azure.ledger_workspace import EVENTS, at

    folder = tmp_path / "run" / "events"
    folder.mkdir(parents=True)
    mine = [e | {"attempt": "local-1"} for e in EVENTS["r1-retry1"]]
    (folder / "events-local-1-round-0-host-9.jsonl").write_text(
        "".join(json.dumps(e) + "\n" for e in mine)
    )
    local_ledger.record_attempt(folder, ledger.Attempt("local-1", at(230), at(330), 1, False))
    out = tmp_path / "local.html"
    assert main(["jobs", "report", "--events-dir", str(folder), "--html", "--out", str(out)]) == 0
    page = Page()
    page.feed(out.read_text())
    doc = ledger.document(local_ledger.book(folder)[0], 0, None)
    table = {row["bucket"]: row["cells"][1:3] for row in page.tables["ledger"] if row["bucket"]}
    assert table["productive"] == ["60000", str(doc["buckets"]["productive"]["node_hours"])]
    assert table["billed"] == ["100000", str(doc["billed"]["node_hours"])]
    bar = next(i for i in page.images if i.get("id") == "bar")
    assert bar["alt"].startswith("node-hours per bucket: productive 0.0167; ")
    assert [row["cells"] for row in page.tables["attempts"][1:]] == [
        ["local-1", "completed", "completed"]
    ]
    capsys.readouterr()
    assert main(["jobs", "report", "r1", "--events-dir", str(folder), "--html"]) == 2
    assert capsys.readouterr().err == (
        "error: azdl jobs report: a JOB (r1) or --events-dir, not both\n"
    )
    assert main(["jobs", "report", "--events-dir", str(tmp_path), "--html"]) == 2
    assert "no attempt-*.json in it" in capsys.readouterr().err


# Run in the copy of the page a browser opens (the page itself runs no script): each image's
# decoded width and the ledger table's text, as far as the browser shows them (0 and "" where
# it lays out nothing), written into the DOM.
PROBE = """<script>
addEventListener("load", () => {
  const shown = (e) => e.checkVisibility() && e.getBoundingClientRect().width > 0;
  const probe = document.createElement("pre");
  probe.id = "probe";
  probe.textContent = JSON.stringify({
    widths: Array.from(document.images, (i) => (shown(i) ? i.naturalWidth : 0)),
    ledger: Array.from(document.querySelectorAll("#ledger tr[data-bucket]"), (r) => [
      r.dataset.bucket, ...Array.from(r.cells, (c) => (shown(c) ? c.innerText : "")),
    ]),
  });
  document.body.append(probe);
});
</script>"""


@pytest.mark.slow
def test_the_page_opens_in_headless_chromium_with_the_ledgers_figures(
    workspace, outputs_file, tmp_path, capsys
):
    """The page in a real browser (Debian's chromium, scripts/setup-browser.sh): every image
    decodes, and the table it lays out holds `azdl jobs ledger --json`'s figures."""
    import shutil
    import subprocess

    browser = shutil.which("chromium")
    assert browser, "chromium is not installed: scripts/setup-browser.sh (make test runs it)"
    out = tmp_path / "r1.html"
    argv = ["r1-retry1", "--outputs", str(outputs_file())]
    assert main(["jobs", "report", *argv, "--html", "--out", str(out)]) == 0
    assert main(["jobs", "ledger", *argv, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    probed = tmp_path / "probed.html"
    probed.write_text(out.read_text().replace("</body>", PROBE + "</body>"))
    dom = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000", "--dump-dom",
         probed.as_uri()],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    found = json.loads(dom.split('<pre id="probe">', 1)[1].split("</pre>", 1)[0])
    assert len(found["widths"]) == 3 and all(w > 100 for w in found["widths"]), found
    keys = ("node_ms", "node_hours", "gpu_hours", "usd")
    shown = {bucket: cells[1:] for bucket, *cells in found["ledger"]}
    assert list(shown) == [*BUCKETS, "billed"]
    for bucket, cells in shown.items():
        figures = doc["billed"] if bucket == "billed" else doc["buckets"][bucket]
        assert [float(c or "nan") for c in cells] == [figures[k] for k in keys], (bucket, cells)
