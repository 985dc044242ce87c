"""The pre-flight health gate that runs on a job's own nodes before training (`azdl submit
--health-check`, `azdl cluster check`): GPUs as the VM size says, and NCCL all-reduce bus
bandwidth against the size's published baseline. Pure Python: it parses nvidia-smi and
nccl-tests' all_reduce_perf output; the levels come in as arguments from the job's command."""
