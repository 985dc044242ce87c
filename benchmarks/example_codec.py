"""tf.train.Example codec speed, hand-written against protobuf: records per CPU-second encoded
(what `azdl data prepare` does per image) and decoded (what the PyTorch reader does per record),
in the operator and the training environment.

    .venv/bin/python benchmarks/example_codec.py [--images 512] [--size 450] [--rounds 5]

"Hand-written" is the wire codec as it stood at BASELINE (a commit on main: reader.image_record,
records.serialize_example), run from `git archive` of that commit's training/ package.
"protobuf" is this checkout's: records.image_record (protobuf's decoder) and, for encoding,
`protobuf_serialize` below (the same Example built and serialized by protobuf). Each
measurement runs in a fresh process of the environment's Python, alternating the two codecs
round by round (best round kept), and counts that process's CPU time (`time.process_time`, so
that other work on the machine does not count), on the same real JPEGs (the sample
generator's, ~0.6 bytes per pixel). Every codec decodes both codecs' records, and the image
fields must come back unchanged, or the run stops.
"""

import argparse
import hashlib
import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# main's last commit with the hand-written codec (training/data/reader.py and records.py).
BASELINE = "11feba2ae4c0a201ffcb6386d68612c418647d47"
ENVIRONMENTS = {
    "operator (.venv)": ".venv/bin/python",
    "training (.venv-train)": ".venv-train/bin/python",
}
CODECS = ("hand-written", "protobuf")
# The code its figures depend on (bench_results.Run adds every module these import): the
# protobuf codec, and both environments' pinned protobuf.
MEASURES = [
    "benchmarks/example_codec.py",
    "training/data/example_codec.py",
    "training/data/records.py",
    "requirements.txt",
    "training/requirements.txt",
]


def protobuf_serialize(image, label, height, width, filename, image_format="JPEG") -> bytes:
    """records.serialize_example's Example, built and serialized by protobuf (map entries in
    key order, so that the same images make the same shard bytes)."""
    from training.data.example_codec import Example

    example = Example()
    feature = example.features.feature
    feature["image/encoded"].bytes_list.value.append(image)
    feature["image/class/label"].int64_list.value.append(label)
    feature["image/height"].int64_list.value.append(height)
    feature["image/width"].int64_list.value.append(width)
    feature["image/format"].bytes_list.value.append(image_format.encode())
    feature["image/filename"].bytes_list.value.append(filename.encode())
    return example.SerializeToString(deterministic=True)


def child(args) -> None:
    """In the environment under test: encode the inputs, decode the given record files."""
    from google.protobuf import __version__ as protobuf_version

    import training
    from training.data import records

    if args.codec == "hand-written":  # the baseline commit: image_record is in the reader
        from training.data.reader import image_record

        serialize = records.serialize_example
    else:
        image_record, serialize = records.image_record, protobuf_serialize

    inputs = pickle.loads(Path(args.inputs).read_bytes())
    encode_times = []
    for _ in range(args.repeats):
        start = time.process_time()
        blobs = [serialize(*item) for item in inputs]
        encode_times.append(time.process_time() - start)
    Path(args.out).write_bytes(pickle.dumps(blobs))
    decoded = {}
    for path in args.decode:
        theirs = pickle.loads(Path(path).read_bytes())
        times = []
        for _ in range(args.repeats):
            start = time.process_time()
            fields = [image_record(blob) for blob in theirs]
            times.append(time.process_time() - start)
        digest = _digest([(f.jpeg, f.label, f.height, f.width, f.filename) for f in fields])
        decoded[path] = {"seconds": min(times), "digest": digest}
    print(
        json.dumps(
            {
                "package": training.__file__,
                "protobuf": protobuf_version,
                "encode_seconds": min(encode_times),
                "decoded": decoded,
            }
        )
    )


def _digest(items) -> str:
    return hashlib.sha256(pickle.dumps(items)).hexdigest()


def sample_inputs(images: int, size: int) -> list[tuple]:
    """(jpeg, label, height, width, filename) of real JPEGs from the sample generator."""
    from PIL import Image

    from training.data.prepare.sample import generate

    with tempfile.TemporaryDirectory() as tmp:
        per_class = max(1, images // 8)
        generate(Path(tmp), classes=8, train_per_class=per_class, validation_per_class=0, size=size)
        files = sorted((Path(tmp) / "train").rglob("*.JPEG"))
        inputs = []
        for label, path in enumerate(files):
            with Image.open(path) as img:
                width, height = img.size
            inputs.append((path.read_bytes(), label % 8, height, width, path.name))
    return inputs


def baseline_tree(tmp: Path) -> Path:
    """BASELINE's training/ package, unpacked under `tmp` (what `import training` finds there)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", BASELINE, "training"],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:
        sys.exit(
            f"error: cannot read the baseline codec at {BASELINE[:12]} from git (a full clone is "
            f"needed): {archive.stderr.decode().strip()}"
        )
    tree = tmp / "baseline"
    tree.mkdir()
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(tree, filter="data")
    return tree


def measure(python: str, tree: Path, codec: str, inputs: Path, out: Path, decode, repeats) -> dict:
    cmd = [python, __file__, "--child", "--inputs", str(inputs), "--out", str(out)]
    cmd += ["--repeats", str(repeats), "--codec", codec, "--decode", *map(str, decode)]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"error: the {codec} codec failed under {python}:\n{run.stderr}")
    result = json.loads(run.stdout.splitlines()[-1])
    if not Path(result["package"]).is_relative_to(tree):  # the codec measured is the one named
        sys.exit(f"error: {codec} imported training from {result['package']}, not from {tree}")
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--images", type=int, default=512, help="distinct JPEGs (records per pass)")
    p.add_argument("--size", type=int, default=450, help="typical image side in pixels")
    p.add_argument("--rounds", type=int, default=5, help="alternating rounds; the best is kept")
    p.add_argument("--repeats", type=int, default=5, help="passes per process (best kept)")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--inputs", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--decode", nargs="*", default=[], help=argparse.SUPPRESS)
    p.add_argument("--codec", choices=CODECS, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:  # imports `training` from the PYTHONPATH its parent gives it
        child(args)
        return
    sys.path.insert(0, str(ROOT))
    from bench_results import Run

    run = Run(MEASURES)
    inputs = sample_inputs(args.images, args.size)
    mean_kb = sum(len(item[0]) for item in inputs) / len(inputs) / 1000
    expected = _digest(inputs)
    rows, data = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        trees = {"hand-written": baseline_tree(tmp), "protobuf": ROOT}
        inputs_file = tmp / "inputs.pickle"
        inputs_file.write_bytes(pickle.dumps(inputs))
        for env_name, python in ENVIRONMENTS.items():
            blobs = {c: tmp / f"{c}-{len(data)}.pickle" for c in CODECS}
            best = {c: {"encode": float("inf"), "decode": float("inf")} for c in CODECS}
            protobuf = None
            for round_number in range(args.rounds):
                order = CODECS if round_number % 2 == 0 else CODECS[::-1]
                for codec in order:
                    # Round 0 writes each codec's records; later rounds decode both codecs'.
                    decode = [] if round_number == 0 else [blobs["hand-written"], blobs["protobuf"]]
                    out = tmp / f"{codec}-out.pickle" if round_number else blobs[codec]
                    result = measure(
                        python, trees[codec], codec, inputs_file, out, decode, args.repeats
                    )
                    protobuf = result["protobuf"]
                    best[codec]["encode"] = min(best[codec]["encode"], result["encode_seconds"])
                    for path, got in result["decoded"].items():
                        if got["digest"] != expected:
                            sys.exit(f"error: {codec} under {env_name} decoded {path} wrongly")
                    if decode:  # timed on the baseline's records: the same bytes for both
                        seconds = result["decoded"][str(blobs["hand-written"])]["seconds"]
                        best[codec]["decode"] = min(best[codec]["decode"], seconds)
            rates = {
                c: {k: len(inputs) / s for k, s in best[c].items()} for c in CODECS
            }  # records per CPU-second
            data[env_name] = {"protobuf": protobuf, "records_per_sec": rates}
            base = rates["hand-written"]
            for codec in CODECS:
                r = rates[codec]
                rows.append(
                    [
                        f"{env_name}, protobuf {protobuf}",
                        codec,
                        f"{r['decode']:,.0f}",
                        f"{r['decode'] / base['decode']:.2f}×",
                        f"{r['encode']:,.0f}",
                        f"{r['encode'] / base['encode']:.2f}×",
                    ]
                )
    for row in rows:
        print(" | ".join(row))
    run.write(
        "example_codec",
        f"tf.train.Example codec: {len(inputs)} real JPEGs of ~{args.size} px ({mean_kb:.0f} kB "
        "mean), records per CPU-second in one process",
        ["environment", "codec", "decoded", "vs hand-written", "encoded", "vs hand-written"],
        rows,
        notes=[
            f"Hand-written: the wire codec of commit {BASELINE[:12]} (reader.image_record, "
            "records.serialize_example; the encoder is unchanged since). protobuf: "
            "records.image_record on training.data.example_codec's messages, and the same "
            "Example built and serialized by protobuf (upb). Decoded: the image fields of one "
            "record; encoded: one record from its fields. CPU time of the measuring process; best "
            "of the rounds, each codec in a fresh process, alternating.",
        ],
        data={"baseline": BASELINE, "mean_kb": mean_kb, "environments": data},
    )


if __name__ == "__main__":
    main()
