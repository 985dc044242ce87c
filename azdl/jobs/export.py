"""A job as Azure ML CLI v2 YAML: what `--export FILE` writes and `--dry-run` prints, azure-ai-ml's
own rendering with `$schema` first, `code:` relative to the file and docker_args as a list
(docs/architecture.md, "Exported YAML")."""

import json
import os
from pathlib import Path

import yaml

# The published JSON schema of command jobs (Azure ML CLI v2 YAML reference, "CLI (v2) command
# job YAML schema").
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
