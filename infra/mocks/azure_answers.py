"""What Azure answers the program's invokes with, offline: the deploying identity's client
config (`getClientConfig`), from which the program takes the subscription its global names
derive from (infra/naming.py)."""

import uuid
from collections.abc import Mapping
from typing import Any

SUBSCRIPTION_ID = "00000000-0000-0000-0000-0000000000aa"
TENANT_ID = "00000000-0000-0000-0000-0000000000bb"
CLIENT_OBJECT_ID = "00000000-0000-0000-0000-0000000000cc"
CLIENT_CONFIG = "azure-native:authorization:getClientConfig"


def stable_guid(*parts: str) -> str:
    """A GUID that is the same for the same parts in every run (plans stay comparable)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "azdl-mock://" + "/".join(parts)))


def client_config(subscription_id: str = SUBSCRIPTION_ID) -> Mapping[str, Any]:
    """`getClientConfig`'s answer: the deploying identity in `subscription_id`."""
    return {
        "clientId": stable_guid("client"),
        "objectId": CLIENT_OBJECT_ID,
        "subscriptionId": subscription_id,
        "tenantId": TENANT_ID,
    }
