"""`namesrv admin`: the operator's command line against a running NameServer (HTTP API, or the native door)."""
