"""`azdl data sample|prepare|stage|copy|fill-nfs`: the data path from ImageNet folders to the nodes.
`copy` runs in the training environment; the others here, with options defined once in the
training modules."""

import argparse
import importlib
import os
import sys
from pathlib import Path

from azdl import staging
from azdl.commands.options import add_job_name_option, add_stack_options, positive_int
from azdl.console import make_console, print_json
from azdl.envs import run_training_module
from azdl.errors import AzdlError
from training.data.copy_shards import COPY_OPTIONS
from training.data.prepare.options import PREPARE_OPTIONS, SAMPLE_OPTIONS, add_options, to_argv

STAGE_SCHEMA = "azdl.stage-result/v1"

# name: (module, options, summary, runs in the training environment)
DATA_TOOLS = {
    "sample": (
        "training.data.prepare.sample",
        SAMPLE_OPTIONS,
        "write a tiny ImageNet-layout dataset of real JPEG files (tests, demos)",
        False,
    ),
    "prepare": (
        "training.data.prepare.convert",
        PREPARE_OPTIONS,
        "convert ImageNet-layout folders to sharded TFRecords plus manifest.json",
        False,
    ),
    "copy": (
        "training.data.copy_shards",
        COPY_OPTIONS,
        "node-side step of the copy storage mode: copy this node's shards to local disk",
        True,
    ),
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "data",
        help="prepare, stage and copy training data",
        description="The data path: ImageNet folders → TFRecord shards (prepare) → premium blob "
        "storage (stage) → the nodes (mount, nfs, or copy to local disk).",
    )
    commands = p.add_subparsers(dest="data_command", metavar="DATA_COMMAND", required=True)
    for name, (module, options, summary, training_side) in DATA_TOOLS.items():
        where = " Runs in the training environment." if training_side else ""
        sub = commands.add_parser(
            name, help=summary, description=f"{summary[0].upper()}{summary[1:]}.{where}"
        )
        add_options(sub, options)
        run = _run_training_side if training_side else _run_here
        sub.set_defaults(func=run, module=module, options=options)

    s = commands.add_parser(
        "stage",
        help="upload shards and manifest to the stack's premium blob container, verified",
        description="Upload the shards and manifest.json of DIR to a blob container: parallel "
        "block uploads, resumable (blobs whose MD5 already matches are skipped), and every blob "
        "verified against the manifest at the end (non-zero exit listing what is missing or "
        "different). Credentials: Microsoft Entra ID (az login, managed identity); for the "
        f"Azurite emulator only, a connection string in ${staging.CONNECTION_STRING_ENV}.",
    )
    s.add_argument("directory", type=Path, help="folder with the shards and manifest.json")
    where = add_stack_options(s)  # the stack's dataAccountUrl and dataContainerName, or:
    where.add_argument(
        "--account-url", help="blob endpoint, e.g. https://ACCOUNT.blob.core.windows.net"
    )
    s.add_argument("--container", help="container name (default: the stack's dataContainerName)")
    s.add_argument("--prefix", default="", help="folder in the container (default: its root)")
    s.add_argument(
        "--parallel-files", type=positive_int, default=4, help="files in flight (default 4)"
    )
    s.add_argument(
        "--max-concurrency",
        type=positive_int,
        default=4,
        help="parallel blocks per file (default 4)",
    )
    s.add_argument(
        "--download-verify",
        action="store_true",
        help="also download every blob and check its MD5 (reads the whole dataset back): the "
        "only check of the stored bytes of blobs over 32 MiB, whose Content-MD5 the service "
        "stores as the uploader set it",
    )
    s.add_argument(
        "--verify-sample",
        type=int,
        default=0,
        metavar="N",
        help="download N blobs picked at random and check their MD5 (default 0)",
    )
    s.add_argument(
        "--json",
        action="store_true",
        help=f"print the result as one JSON document ({STAGE_SCHEMA}); stable for scripts",
    )
    s.set_defaults(func=_run_stage)

    f = commands.add_parser(
        "fill-nfs",
        help="copy the staged shards from blob storage into the stack's NFS share (a cluster job)",
        description="Submit a one-node job on the stack's cluster that copies every shard and "
        "manifest.json of --data-path from the data container (read-only blob mount) to the same "
        "folder of the NFS share, checked against the manifest's MD5s. Needed once per dataset "
        "before `azdl submit --storage nfs`: the NFS share can't be written over the storage "
        "REST API, only from inside the VNet.",
    )
    add_stack_options(f)
    f.add_argument(
        "--data-path", default="", help="folder of the shards in the container, and in the share"
    )
    f.add_argument("--experiment", default="azdl", help="Azure ML experiment (default azdl)")
    add_job_name_option(f, "azdl-fill-nfs-<time>-<hex>")
    f.add_argument("--dry-run", action="store_true", help="print the job; do not contact Azure")
    f.add_argument("--wait", action="store_true", help="stream the job's logs until it ends")
    f.add_argument(
        "--json",
        action="store_true",
        help="print the job's name, studio URL and status as one JSON document "
        "(azdl.submit-result/v1, as `azdl submit --json`); stable for scripts",
    )
    f.set_defaults(func=_run_fill_nfs)


def _run_training_side(args: argparse.Namespace) -> int:
    return run_training_module(args.module, to_argv(args, args.options))


def _run_here(args: argparse.Namespace) -> int:
    return importlib.import_module(args.module).main(to_argv(args, args.options))


def _run_fill_nfs(args: argparse.Namespace) -> int:
    from azdl.jobs.fill_nfs import build_fill_nfs_job
    from azdl.jobs.stack_outputs import load_outputs
    from azdl.jobs.submit import new_run_id, send

    if args.json and args.dry_run:
        raise AzdlError("--json reports a submitted job; --dry-run prints its YAML")
    outputs = load_outputs(args.stack, args.outputs)
    run_id = args.name or new_run_id("fill-nfs")
    job = build_fill_nfs_job(outputs, args.data_path.strip("/"), run_id, args.experiment)
    return send(outputs, job, dry_run=args.dry_run, wait=args.wait, as_json=args.json)


def _run_stage(args: argparse.Namespace) -> int:
    if args.parallel_files < 1 or args.max_concurrency < 1:
        raise AzdlError("--parallel-files and --max-concurrency must be at least 1")
    if args.verify_sample < 0:
        raise AzdlError(f"--verify-sample must be 0 or more, got {args.verify_sample}")
    staging.check_folder(args.directory)  # a local mistake is named before any sign-in
    from azdl.jobs.stack_outputs import read_outputs

    connection_string = os.environ.get(staging.CONNECTION_STRING_ENV)
    account_url, container = args.account_url, args.container
    if args.stack or args.outputs:
        values, source = read_outputs(args.stack, args.outputs)
        account_url, stack_container = staging.target_from_outputs(values, source)
        container = container or stack_container
    if connection_string and account_url:
        raise AzdlError(
            f"${staging.CONNECTION_STRING_ENV} (emulator) and an account URL are both set; "
            "unset the variable to use a real account"
        )
    if not container:
        raise AzdlError("no container: give --container NAME, --stack STACK or --outputs FILE")
    client = staging.container_client(container, account_url, connection_string)
    console = make_console(stderr=True)
    report = staging.stage(
        args.directory,
        client,
        args.prefix,
        args.parallel_files,
        args.max_concurrency,
        args.download_verify,
        console,
        args.verify_sample,
    )
    if args.json:
        print_json(STAGE_SCHEMA, {
            "ok": report.ok, "uploaded": report.uploaded, "skipped": report.skipped,
            "failed": report.failed, "missing": report.missing, "different": report.different,
            "unlisted": report.unlisted, "read_back": report.read_back,
            "bytes_uploaded": report.bytes_uploaded, "seconds": report.seconds,
        })  # fmt: skip
    else:
        print(
            f"uploaded {len(report.uploaded)} file(s), {report.bytes_uploaded / 1e6:.1f} MB in "
            f"{report.seconds:.1f} s ({report.mb_per_s:.1f} MB/s); {len(report.skipped)} already "
            f"in place; verified against the manifest: {len(report.missing)} missing, "
            f"{len(report.different)} different, {len(report.unlisted)} not listed; "
            f"{report.read_back} read back"
        )
    if not (args.download_verify or args.verify_sample):
        print(
            "note: a blob over 32 MiB is checked by size and by the Content-MD5 the uploader "
            "set, which the service does not check against the stored bytes; "
            "--download-verify reads every blob back (--verify-sample N: N random ones)",
            file=sys.stderr if args.json else sys.stdout,
        )
    if report.ok:
        return 0
    for name, why in sorted(report.failed.items()):
        print(f"failed: {name}: {why}", file=sys.stderr)
    for name in report.missing:
        print(f"missing: {name}", file=sys.stderr)
    for name in report.different:
        print(f"different from the manifest: {name}", file=sys.stderr)
    for name in report.unlisted:
        print(f"not in the manifest (training would read it too): {name}", file=sys.stderr)
    if report.unlisted:
        print("remove those blobs, or stage into another --prefix", file=sys.stderr)
    if report.failed or report.missing or report.different:
        print("rerun the same command to upload what is missing or different", file=sys.stderr)
    return 1
