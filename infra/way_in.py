"""Whether anyone can use a private stack as configured: someone holding the operator commands'
roles, and a machine with line of sight into its VNet.

A private stack's workspace, storage and registry answer only on private endpoints, resolved by
private DNS zones that answer only in the VNets linked to them (docs/access.md, "Prod: how a
team gets in"). The stack gives a way in with `access.jumpHost` (Bastion and a jump host in the
VNet), `network.dnsZoneVnetLinks` (its zones linked to a peered hub or VPN network) or
`network.existing` (a landing zone's network, reached through the landing zone's own
connectivity); the operator commands' roles come from `azdl:operators` (infra/access.py). The
shipped prod stack has neither, on purpose (an adopter fills them in), so `azdl plan` says what
is missing.
"""

from infra.config import StackConfig


def missing_ways_in(cfg: StackConfig) -> list[str]:
    """What keeps a private stack from being used (nothing for a public one)."""
    if not cfg.network.private:
        return []
    missing = []
    if not cfg.operators:
        missing.append(
            "a private stack with no azdl:operators: nobody holds the roles `azdl data stage`, "
            "`azdl submit` and `azdl bench` need (docs/access.md, Operators and their roles); "
            "name the users or groups who run jobs, or grant those roles by hand"
        )
    network = cfg.network
    if cfg.jump_host is None and not network.dns_zone_vnet_links and network.existing is None:
        missing.append(
            "a private stack with no way in: its services answer only on private endpoints, "
            "and neither azdl:access.jumpHost (Bastion and a jump host) nor "
            "network.dnsZoneVnetLinks (a peered hub or VPN network) nor network.existing (a "
            "landing zone's network) gives any machine line of sight to them (docs/access.md, "
            "Prod: how a team gets in)"
        )
    return missing
