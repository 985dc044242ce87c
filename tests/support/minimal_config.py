"""A minimal valid stack config (the `azdl:*` keys a stack file holds), for the config and
docs tests."""

VALID = {
    "azdl:environment": "dev",
    "azdl:location": "westeurope",
    "azdl:namePrefix": "azdltest",
    "azdl:tags": {"environment": "dev", "project": "azdl", "owner": "me", "costCenter": "cc1"},
    "azdl:maxGpuSpendPerHourUsd": 10,
    "azdl:network": {
        "mode": "serviceEndpoints",
        "addressSpace": "10.40.0.0/16",
        "trainingSubnet": "10.40.0.0/20",
        "privateEndpointSubnet": "10.40.16.0/24",
    },
    "azdl:cluster": {"vmSize": "Standard_NC24ads_A100_v4", "maxNodes": 2},
}
