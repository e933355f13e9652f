"""The original's module path for its lease store: ``from interlock.leases import Leases``
(its design story lists ``leases.py``). The store itself is :class:`interlock.lowlevel.Leases`."""

from .lowlevel import Leases

__all__ = ["Leases"]
