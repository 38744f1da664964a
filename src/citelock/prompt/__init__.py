"""Prompts: templates, assembly under a budget, serialization, the prompt index, answer parsing."""
