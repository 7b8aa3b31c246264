"""The process: the command line, the one place that wires concrete classes (`runtime`,
`http_app`), the aiohttp server, readiness and the status page."""
