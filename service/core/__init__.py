"""The transport-neutral core: the NameServer's operations and rules, over the store."""

from service.core.access import ADMIN, ANONYMOUS, Access, Principal, Role
from service.core.bodies import RegistrationMemo
from service.core.nameserver import NameServer
from service.core.route_cache import MISSING, RouteEntry

__all__ = ["ADMIN", "ANONYMOUS", "MISSING", "Access", "NameServer", "Principal", "RegistrationMemo", "Role",
           "RouteEntry"]
