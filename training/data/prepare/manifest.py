"""The data manifest: `manifest.json` beside the shards.

It records what a conversion produced (counts per split and class, every shard with its size
and checksums, the label map) and what it had to change or leave out (re-encoded and skipped
images). The stager verifies uploads against it and the copy step sizes local disk with it,
so this module is stdlib-only: both the operator and the training environment import it.
"""

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

MANIFEST_NAME = "manifest.json"
SHARD_FILE = re.compile(r"^(train|validation)-\d{5}-of-\d{5}$")  # what training lists as shards
SCHEMA = "azdl.manifest/v1"
_CHUNK = 4 * 1024 * 1024


class ManifestError(ValueError):
    """A manifest that is missing or does not follow the schema."""


@dataclass(frozen=True)
class ShardEntry:
    name: str
    split: str
    num_examples: int
    size: int
    md5: str  # hex digest of the whole file
    sha256: str

    @property
    def content_md5(self) -> bytes:
        """The raw MD5 digest, as Azure Blob Storage stores it in Content-MD5."""
        return bytes.fromhex(self.md5)


@dataclass(frozen=True)
class SplitSummary:
    num_examples: int
    num_shards: int
    class_counts: dict[str, int]


@dataclass(frozen=True)
class Manifest:
    label_map: dict[str, int]
    splits: dict[str, SplitSummary]
    shards: list[ShardEntry]
    reencoded: list[dict[str, str]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    options: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps({"schema": SCHEMA, **asdict(self)}, indent=2, sort_keys=True) + "\n"

    def write(self, directory: Path) -> Path:
        path = Path(directory) / MANIFEST_NAME
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(self.to_json())
        tmp.replace(path)
        return path

    @property
    def total_bytes(self) -> int:
        return sum(s.size for s in self.shards)


def load_manifest(path: str | Path) -> Manifest:
    """Read `manifest.json` (or the one inside a directory) with a clear error if it is unusable."""
    path = Path(path)
    if path.is_dir():
        path = path / MANIFEST_NAME
    if not path.is_file():
        raise ManifestError(
            f"no manifest at {path}; `azdl data prepare` writes {MANIFEST_NAME} beside the shards"
        )
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path} is not valid JSON: {exc}") from exc
    if raw.get("schema") != SCHEMA:
        raise ManifestError(f"{path} has schema {raw.get('schema')!r}; expected {SCHEMA!r}")
    try:
        return Manifest(
            label_map=dict(raw["label_map"]),
            splits={name: SplitSummary(**s) for name, s in raw["splits"].items()},
            shards=[ShardEntry(**s) for s in raw["shards"]],
            reencoded=list(raw.get("reencoded", [])),
            skipped=list(raw.get("skipped", [])),
            options=dict(raw.get("options", {})),
        )
    except (KeyError, TypeError) as exc:
        raise ManifestError(f"{path} does not follow {SCHEMA}: {exc}") from exc


def file_md5(path: str | Path) -> str:
    """MD5 hex of a file, read in chunks (what the manifest records and copies are checked by)."""
    md5 = hashlib.md5()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            md5.update(chunk)
    return md5.hexdigest()


def file_digests(path: str | Path) -> tuple[int, str, str]:
    """(size, md5 hex, sha256 hex) of a file, read once in chunks."""
    md5, sha256, size = hashlib.md5(), hashlib.sha256(), 0
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            md5.update(chunk)
            sha256.update(chunk)
            size += len(chunk)
    return size, md5.hexdigest(), sha256.hexdigest()
