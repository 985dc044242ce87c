"""Faults the tests plant in the program, to see a check go red."""


def login_server_read(real_init):
    """The registry component's `__init__`, also reading the login server from the generic
    registry's computed `properties` (what infra/registry.py once did) as an output."""

    def reads_computed(self, name, args, opts=None):
        real_init(self, name, args, opts)
        read = self.registry.properties.apply(lambda p: p["loginServer"])
        self.register_outputs({"loginServer": read})

    return reads_computed
