"""The seeds' Temporal snippets, run as written from tests/seeds (the one copy; its README
says where each comes from): the landing page's "Your code" Python tab
(``landing_python.py``: the gate) and Temporal tab (``landing_temporal.py``: the activity
and the workflow), then, when ``$INTERLOCK_SEED_ACTIVITY`` is ``activities.py``, the landing
page's ``activities.py``, whose activity takes the tab's place. Each file runs in this
module's namespace, as if the tabs were pasted into one file, after the names they use but
do not define (Temporal's, and the simulated payments service's, in place of Stripe).
temporal_snippet.py is the worker that runs them."""

import os
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow
from temporalio.common import RetryPolicy

from interlock import payments_sim

SEEDS = Path(__file__).resolve().parents[4] / "tests" / "seeds"
ACTIVITY = os.environ.get("INTERLOCK_SEED_ACTIVITY", "landing_temporal.py")
FILES = ["landing_python.py", "landing_temporal.py"] + (["activities.py"] if ACTIVITY == "activities.py" else [])

globals().update(activity=activity, workflow=workflow, timedelta=timedelta, RetryPolicy=RetryPolicy,
                 **{name: getattr(payments_sim, name) for name in (
                     "stripe", "charge_for", "is_eligible", "refunded_total", "can_refund", "refund_exists")})
for _name in FILES:
    exec(compile((SEEDS / _name).read_text(), str(SEEDS / _name), "exec"), globals())
