"""The commented starter file ``citelock config init`` writes: one high-stakes and one low-stakes surface."""

from __future__ import annotations

__all__ = ["STARTER"]

STARTER = """\
# citelock.toml: every surface, judge and backend, named once. Every door reads it: `citelock answer | check |
# audit | metrics | calibrate | queue | review | log --surface NAME`, and in Python citelock.Config.load(),
# Citelock.from_config(...), citelock.wrap(client, config=...), Guard.from_config(...).
# Precedence: a flag or keyword argument > the environment > this file > the defaults.
# `citelock config check` validates it; `citelock config show --surface legal` prints every value and its origin.
# Secrets are never written here: "${VAR}" or { env = "VAR" } reads the environment.

# The prompt log, review queue and result store: a SQLite path or a PostgreSQL URL ("${PG_URL}").
store = ".citelock/citelock.db"

# The surface a command runs when none is named (CITELOCK_SURFACE overrides it).
default_surface = "support"

# Named support judges. kind: lexical (calibrated word overlap), offline, or llm (a model).
[judges.overlap]
kind = "lexical"
# routing = "calibration.json"              # thresholds fitted by `citelock calibrate --fit --write`
# thresholds = { pass_at = 0.6, fail_below = 0.3 }

# [judges.strong]                           # an LLM judge on an OpenAI-compatible server
# kind = "llm"
# base_url = "http://127.0.0.1:8080/v1"

# Named backends for `citelock answer --backend NAME`.
# [backends.vllm]
# kind = "openai"
# base_url = "http://127.0.0.1:8000/v1"
# server = "vllm"
# api_key = { env = "UPSTREAM_KEY" }

# A high-stakes surface: every surviving citation is judged, failures fail closed.
[surfaces.legal]
stakes = "high"
on_fail = "drop_claim"                      # block | drop_claim | mark
judge = "overlap"
relevance = "free"                          # free | judged | off

# Audit samples of the judged citations for people to label (the judge's live false-pass rate), then refit:
# `citelock calibrate --from-store DB --surface legal --fit`.
[surfaces.legal.audit]
near_pass_rate = 0.25
pass_rate = 0.05
review_rate = 0.1
fail_rate = 0.05
seed = 0

[surfaces.legal.stream]
show = "after_judge"                        # immediately | after_checks | after_judge

[surfaces.legal.alarms]                     # `citelock metrics --check`
window = 4
min_labels = 30

[surfaces.legal.gateway]                    # `citelock gateway --config`: what a blocked answer becomes
on_block = "error"                          # error (HTTP 400) | refuse (HTTP 200 with the refusal text)
# refusal = "Please ask at the front desk."

# A low-stakes surface: a deterministic sample of citations is judged, failing claims are marked.
[surfaces.support]
stakes = "low"
sample_rate = 0.1
on_fail = "mark"
judge = "overlap"

# A surface may start from another and override some keys:
# [surfaces.contracts]
# inherit = "legal"
# on_fail = "block"
"""
"""The starter file's text (valid against the schema: a test loads it)."""
