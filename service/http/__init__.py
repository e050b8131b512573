"""The HTTP door: API v1 routes, thin handlers over the core, errors as JSON."""
