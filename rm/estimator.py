"""The estimator API: how policies that need job sizes (SJF, SLearn, 3Sigma) learn them.

An estimator sees applications through the same read-only views as policies and may
observe finished containers to learn. Plugins in ``treadle.estimators`` subclass it.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

from pydantic import BaseModel

from rm.policy import AppView, ClusterView, NoParams
from treadle.messages import Container, ContainerStatus

#: The entry-point group of estimator plugins (the registry's ``estimators`` kind).
ENTRY_POINT_GROUP = "treadle.estimators"


class Estimator(ABC):
    description: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams

    def __init__(self, params: BaseModel | None = None) -> None:
        self.params: Any = params if params is not None else self.Params()

    @abstractmethod
    def remaining_s(self, app: AppView, cluster: ClusterView) -> float:
        """Estimated remaining work of ``app`` in task-seconds."""

    def observe(  # noqa: B027
        self, app: AppView, container: Container, status: ContainerStatus
    ) -> None:
        """A container of ``app`` ended: learn from it."""
