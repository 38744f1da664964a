"""Citation metrics from stored guard results and the review queue, and their dashboard."""
