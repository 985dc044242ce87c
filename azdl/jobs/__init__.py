"""Jobs: the service layer behind `azdl submit`, `bench`, `cluster check` and `data fill-nfs` (see
docs/architecture.md, "Jobs and the CLI"), from stack outputs to submission and reports."""

import logging

# azure-ai-ml logs a warning for each experimental schema class it loads at import time; they
# are no concern of a user of azdl and would bury the job spec that --dry-run prints.
logging.getLogger("azure.ai.ml._utils._experimental").setLevel(logging.ERROR)
