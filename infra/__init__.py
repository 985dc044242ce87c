"""The Pulumi program for azdl's Azure training platform (see Pulumi.yaml and README, Deploy)."""
