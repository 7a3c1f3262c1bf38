"""zerograd's code under test: one gradient-accumulation core and interchangeable strategies.

>>> import strategies
>>> strategies.available()
['block', 'flat', 'foreach', 'global', 'lazy', 'main_grad', 'native']
>>> collector = strategies.GradientCollector(model, strategy="lazy", grad_req="add")
"""

from strategies.base import Strategy
from strategies.block import BlockStrategy
from strategies.collector import GRAD_REQS, GradientCollector
from strategies.flat import FlatStrategy
from strategies.foreach import ForeachStrategy
from strategies.global_search import GlobalStrategy
from strategies.lazy import LazyStrategy
from strategies.main_grad import MainGradStrategy
from strategies.native import NativeStrategy
from strategies.registry import ENTRY_POINT_GROUP, available, get, register

for _cls in (
    GlobalStrategy,
    BlockStrategy,
    NativeStrategy,
    LazyStrategy,
    ForeachStrategy,
    FlatStrategy,
    MainGradStrategy,
):
    register(_cls.name, _cls)
del _cls

__all__ = [
    "ENTRY_POINT_GROUP",
    "GRAD_REQS",
    "BlockStrategy",
    "FlatStrategy",
    "ForeachStrategy",
    "GlobalStrategy",
    "GradientCollector",
    "LazyStrategy",
    "MainGradStrategy",
    "NativeStrategy",
    "Strategy",
    "available",
    "get",
    "register",
]
