"""Reviewers' tools: an offline plan of a stack (manifest + tree), a diff of two plans, the
policy pack run against a plan, and a cost estimate. Nothing here needs Azure or the Pulumi CLI.
"""
