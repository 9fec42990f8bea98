"""``acl.constants``: the pyACL constants under their real names (see acllab.constants)."""

from ..constants import *  # noqa: F403
from ..constants import __all__  # noqa: F401
