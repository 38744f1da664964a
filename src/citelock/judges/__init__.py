"""Support judges: the protocol, an LLM judge over any backend, and a competent offline judge."""

from citelock.judges._protocol import Judge

__all__ = ["Judge"]
