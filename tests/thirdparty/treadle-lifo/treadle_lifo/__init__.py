"""lifo: the most recently submitted application first."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from rm.policy import AppView, ClusterView, OrderingPolicy


class LifoParams(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    #: False serves the oldest first instead (so a parameter visibly changes behaviour).
    newest_first: bool = True


class LifoPolicy(OrderingPolicy[LifoParams]):
    description = "last in, first out: the newest application first"

    def sort_key(self, app: AppView, cluster: ClusterView) -> int:
        return -app.seq if self.params.newest_first else app.seq
