"""GET /api/recommendations: findings about one worker's trace, with their numbers, thresholds
and evidence (the list the overview embeds)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends
from pydantic import BaseModel

from ..analysis.rules import RULES
from .deps import Selection, overview_of, select
from .models import Recommendation
from .views import View, every_trace


class Recommendations(BaseModel):
    recommendations: list[Recommendation]
    warnings: list[str]


router = APIRouter(tags=["recommendations"])
# The note: how findings are made, how their savings are estimated, then each rule module's thresholds.
VIEW = View("recommendations", router, every_trace,
            ("..analysis.recommendations", "..analysis.savings", *dict.fromkeys(rule.__module__ for rule in RULES)))


@router.get("/api/recommendations", response_model=Recommendations, response_model_exclude_unset=True)
def get_recommendations(sel: Selection = Depends(select)) -> dict[str, Any]:
    """Findings about this trace, largest saving first, each with its numbers, thresholds,
    evidence (time ranges and event ids that open the Trace view on the place) and what fixing it
    would save per step (saving_us, saving_ratio, saving_note, included_in)."""
    return {"recommendations": overview_of(sel)["recommendations"], "warnings": []}
