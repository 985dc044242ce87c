"""`azdl estimate`: which cluster trains a workload by a deadline or within a budget, and at
what cost, from measured scaling (or a stated model of it) and the stack's price table.
`workload` → `throughput` → `frontier` → `report`."""
