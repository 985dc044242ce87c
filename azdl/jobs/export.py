"""A job as Azure ML CLI v2 YAML: what `--export FILE` writes and `--dry-run` prints.

The document is azure-ai-ml's own rendering of the command job (CommandJob._to_dict, the
marshmallow schema `az ml job create -f` and `load_job` read back), with:
- `$schema` first: the published JSON schema of command jobs
  (https://azuremlschemas.azureedge.net/latest/commandJob.schema.json; Azure ML's CLI v2 YAML
  reference, "CLI (v2) command job YAML schema");
- `code:` relative to the YAML file's folder, which is how load_job resolves it, so the file
  and the code can move together (a repository checkout, a CI workspace);
- `resources.docker_args` as a list: azure-ai-ml 1.35 takes a string or a list there, but its
  dump writes a list as Python's repr of it, which no loader parses back into arguments.
"""

import json
import os
from pathlib import Path

import yaml

SCHEMA_URL = "https://azuremlschemas.azureedge.net/latest/commandJob.schema.json"


def job_document(job, yaml_dir: Path) -> dict:
    """The command job (azure-ai-ml's `command()` node or CommandJob) as a CLI v2 YAML mapping,
    `code:` relative to `yaml_dir`."""
    command_job = job._to_job() if hasattr(job, "_to_job") else job
    body = json.loads(json.dumps(command_job._to_dict()))  # OrderedDicts -> plain data
    body = {key: value for key, value in body.items() if value not in ({}, None)}
    if body.get("code"):
        body["code"] = Path(os.path.relpath(body["code"], yaml_dir.resolve())).as_posix()
    docker_args = getattr(command_job.resources, "docker_args", None)
    if isinstance(docker_args, list):
        body["resources"]["docker_args"] = list(docker_args)
    return {"$schema": SCHEMA_URL, **body}


def job_yaml(job, yaml_dir: Path) -> str:
    return yaml.safe_dump(job_document(job, yaml_dir), sort_keys=False, width=100)


def write(job, path: Path) -> Path:
    """Write the job's YAML to `path` (its folder is created); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(job_yaml(job, path.parent))
    return path
