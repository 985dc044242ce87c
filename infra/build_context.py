"""A training image's build context as one archive, and its upload to ACR Tasks.

An image builds from `images/<framework>/` (its Dockerfile) with the repository's `training/`
folder inside the context as `training/`, minus what each folder's `.dockerignore` excludes.
`archive(framework)` packs exactly the files `infra.images.content_hash` hashes, so the tag
names the bytes that are built. The same archive builds locally (`python -m infra.build_context
tensorflow | docker build -`, docs/images.md) and in Azure.

`SourceUpload` is the only thing `pulumi up` sends from the deployer's machine for an image: a
PUT of the archive to the upload URL the registry's control plane hands out
(`listBuildSourceUploadUrl`, a SAS URL on storage that ACR Tasks owns, not the stack's
registry or storage). It uploads only when the content hash changes: its diff ignores the
fresh URL every deployment asks for, so an unchanged image keeps its earlier source, its
TaskRun sees no change, and nothing is rebuilt.
"""

import gzip
import hashlib
import io
import sys
import tarfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pulumi
import pulumi.dynamic

from infra.dockerignore import context_files

# Package data: the `images` and `training` packages sit beside `infra`, in a checkout's root or
# in the site-packages the wheel installed them into. Found by place, not by import: Pulumi runs
# the program with its own folder (infra/) first on the path, where `images` is infra/images.py.
PACKAGES_ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = PACKAGES_ROOT / "images"
TRAINING_DIR = PACKAGES_ROOT / "training"
# Where training/ sits inside the context (the Dockerfiles `COPY training/...`).
TRAINING_IN_CONTEXT = "training"


def context_members(framework: str) -> list[tuple[str, Path]]:
    """(path in the archive, file) for every file of the framework's build context, sorted."""
    members = [
        (p.relative_to(IMAGES_DIR / framework).as_posix(), p)
        for p in context_files(IMAGES_DIR / framework)
    ]
    members += [(f"{TRAINING_IN_CONTEXT}/{p.relative_to(TRAINING_DIR).as_posix()}", p)
                for p in context_files(TRAINING_DIR)]  # fmt: skip
    names = [name for name, _ in members]
    clash = sorted({n for n in names if names.count(n) > 1})
    if clash:
        raise ValueError(
            f"images/{framework} and training/ both provide {clash} in the build context: "
            f"rename the file in images/{framework}"
        )
    return sorted(members)


def content_hash(framework: str) -> str:
    """16 hex digits of SHA-256 over the context's paths (as in the repository: `images/...`,
    `training/...`, wherever azdl is installed) and bytes."""
    digest = hashlib.sha256()
    for name, path in context_members(framework):
        in_training = name.startswith(f"{TRAINING_IN_CONTEXT}/")
        in_repo = name if in_training else f"images/{framework}/{name}"
        digest.update(in_repo.encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def archive(framework: str) -> bytes:
    """The context as a gzipped tar (what `docker build -` and ACR Tasks take). Byte-for-byte
    reproducible: fixed order, times, owners and modes."""
    buffer = io.BytesIO()
    with (
        gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as gz,
        tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for name, path in context_members(framework):
            data = path.read_bytes()
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def upload(upload_url: str, body: bytes) -> None:
    """PUT `body` as a block blob at a SAS `upload_url` (Azure Blob Storage's Put Blob)."""
    request = urllib.request.Request(
        upload_url, data=body, method="PUT", headers={"x-ms-blob-type": "BlockBlob"}
    )
    host = urllib.parse.urlparse(upload_url).hostname
    try:
        with urllib.request.urlopen(request, timeout=300) as response:
            if response.status not in (200, 201):
                raise RuntimeError(f"upload of the build context to {host}: HTTP {response.status}")
    except urllib.error.HTTPError as exc:
        raise RuntimeError(
            f"ACR Tasks' source upload endpoint {host} refused the build context "
            f"(HTTP {exc.code}): the upload URL is valid for a short time; run `pulumi up` again"
        ) from None
    except urllib.error.URLError as exc:
        raise RuntimeError(
            f"cannot reach ACR Tasks' source upload endpoint {host} ({exc.reason}): the "
            "deploying machine needs outbound HTTPS to *.blob.core.windows.net"
        ) from None


class _SourceUploadProvider(pulumi.dynamic.ResourceProvider):
    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]):
        changed = olds.get("content_hash") != news.get("content_hash")
        return pulumi.dynamic.DiffResult(
            changes=changed,
            replaces=["content_hash"] if changed else [],
            delete_before_replace=False,
        )

    def create(self, props: dict[str, Any]):
        body = archive(props["framework"])
        actual = content_hash(props["framework"])
        if actual != props["content_hash"]:
            raise RuntimeError(
                f"images/{props['framework']} or training/ changed during `pulumi up` "
                f"(hash {props['content_hash']} at the start, {actual} now): run it again"
            )
        upload(props["upload_url"], body)
        outs = {
            "framework": props["framework"],
            "content_hash": props["content_hash"],
            "relative_path": props["relative_path"],
            "archive_bytes": len(body),
        }
        return pulumi.dynamic.CreateResult(id_=props["relative_path"], outs=outs)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        """Nothing to delete: ACR Tasks owns the uploaded source and expires it."""


class SourceUpload(pulumi.dynamic.Resource):
    """The build context of `framework`, uploaded for ACR Tasks; `relative_path` is what a
    DockerBuildRequest's `sourceLocation` takes."""

    relative_path: pulumi.Output[str]

    def __init__(
        self,
        name: str,
        framework: str,
        upload_url: pulumi.Input[str],
        relative_path: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        props = {
            "framework": framework,
            "content_hash": content_hash(framework),
            "upload_url": pulumi.Output.secret(upload_url),
            "relative_path": relative_path,
            "archive_bytes": None,
        }
        super().__init__(_SourceUploadProvider(), name, props, opts)


if __name__ == "__main__":  # python -m infra.build_context <framework> > context.tar.gz
    if len(sys.argv) != 2 or not (IMAGES_DIR / sys.argv[1] / "Dockerfile").is_file():
        known = sorted(p.parent.name for p in IMAGES_DIR.glob("*/Dockerfile"))
        print(f"usage: python -m infra.build_context {{{','.join(known)}}} > context.tar.gz",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    if sys.stdout.isatty():
        print("error: the archive is binary: redirect it to a file or pipe it to `docker build -`",
              file=sys.stderr)  # fmt: skip
        sys.exit(2)
    sys.stdout.buffer.write(archive(sys.argv[1]))
