"""rmq-namesrv: RocketMQ's NameServer as stateless aiohttp workers over one Redis."""

__version__ = "0.1.0"
