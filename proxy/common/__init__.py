"""What every layer of `proxy/` uses: the front request handed to the engine, owned background
tasks, client-facing faults, draining and stopping."""
