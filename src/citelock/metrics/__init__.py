"""Citation metrics from stored guard results and the review queue, and their dashboard.

What ``citelock metrics`` computes: citation precision, citation recall, faithfulness, pass / repair / block
rates, per surface and per ISO week, each number with its definition.
"""

from citelock.metrics._charts import metrics_chart
from citelock.metrics._compute import (
    ALL,
    METRIC_DEFINITIONS,
    MetricsReport,
    MetricValue,
    compute_metrics,
    metrics_from_store,
)

__all__ = [
    "ALL",
    "METRIC_DEFINITIONS",
    "MetricValue",
    "MetricsReport",
    "compute_metrics",
    "metrics_chart",
    "metrics_from_store",
]
