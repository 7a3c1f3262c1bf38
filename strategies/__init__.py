"""zerograd's code under test: one gradient-accumulation core and interchangeable strategies.

>>> import strategies
>>> strategies.available()
['block', 'flat', 'foreach', 'global', 'lazy', 'main_grad', 'native']
>>> collector = strategies.GradientCollector(model, strategy="lazy", grad_req="add")

The built-in strategies are ``registry.BUILTIN`` (one module each); their classes are
attributes of this package too (``strategies.LazyStrategy``).
"""

from importlib import import_module

from strategies.base import Strategy
from strategies.collector import GRAD_REQS, GradientCollector
from strategies.registry import BUILTIN, ENTRY_POINT_GROUP, available, get, register


def _builtin(where: str) -> type[Strategy]:
    module, _, name = where.partition(":")
    # relative to this package: a copy under another name (``--base``) imports its own modules
    return getattr(import_module(f"{__name__}.{module}"), name)


for _name, _where in BUILTIN.items():
    _cls = _builtin(_where)
    register(_name, _cls)
    globals()[_cls.__name__] = _cls
del _name, _where, _cls

__all__ = [
    "BUILTIN",
    "ENTRY_POINT_GROUP",
    "GRAD_REQS",
    "GradientCollector",
    "Strategy",
    "available",
    "get",
    "register",
    *(where.partition(":")[2] for where in BUILTIN.values()),
]
