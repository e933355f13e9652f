"""The original's module path for its three-line decorator (its design story lists
``easy.py``): ``from interlock.easy import Interlock``. The API is :mod:`interlock.decorator`."""

from .decorator import Interlock

__all__ = ["Interlock"]
