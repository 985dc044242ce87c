"""`azdl estimate`: which cluster trains a workload by a deadline or within a budget, and at
what cost, from measured scaling (or a stated model of it) and the stack's price table.

`workload` holds what is trained, `throughput` where each images/s figure comes from (measured
bench results, the GPU kit's single-GPU rate with a communication model, published rates,
overrides), `frontier` the options, their cost and the recommendation, `report` the table, plot
and JSON.
"""
