"""The HTTP front door: routes, handlers, middlewares."""
