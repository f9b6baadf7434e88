"""The workloads `profboard collect` runs: each adds its own options and writes run folders."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

from . import compiled, ddp, loss_sync, transformer, vision
from .common import Options


@dataclass(frozen=True)
class Workload:
    name: str
    module: ModuleType

    @property
    def summary(self) -> str:
        return self.module.SUMMARY

    @property
    def add_arguments(self) -> Callable[[argparse.ArgumentParser], None]:
        return self.module.add_arguments

    @property
    def run(self) -> Callable[[Options, argparse.Namespace], list[dict[str, Any]]]:
        return self.module.run


WORKLOADS: dict[str, Workload] = {w.name: w for w in (
    Workload("resnet50", vision),
    Workload("loss_sync", loss_sync),
    Workload("compile", compiled),
    Workload("transformer", transformer),
    Workload("ddp", ddp),
)}
