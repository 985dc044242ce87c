"""Cluster jobs: stack outputs, the Azure ML job spec, submission, throughput logs, reports."""

import logging

# azure-ai-ml logs a warning for each experimental schema class it loads at import time; they
# are no concern of a user of azdl and would bury the job spec that --dry-run prints.
logging.getLogger("azure.ai.ml._utils._experimental").setLevel(logging.ERROR)
