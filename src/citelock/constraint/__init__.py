"""Constraints: backend limits, the per-request citation schema, its grammar and pydantic model."""
