"""Helpers shared by the test areas: fakes, real-server fixtures, harnesses (not tests themselves)."""
