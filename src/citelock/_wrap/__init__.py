"""Wrap the generation call a team already makes (above the pipeline: it imports the pipeline, never the reverse).

- :func:`wrap`: the caller's own ``openai.OpenAI`` / ``openai.AsyncOpenAI`` client, whose
  ``chat.completions.create(..., chunks=...)`` keeps the caller's messages, injects the per-request citation
  constraint the way the server takes it, logs, guards, repairs, feeds the sinks and returns the SDK's response
  with ``response.citelock``.
- :func:`answer_model`: the per-request citation model for a structured-output call of the caller's own
  (instructor's ``response_model=``, ``beta.chat.completions.parse``'s ``response_format=``), and
  :meth:`AnswerModel.checkable` to guard its result.
"""

from citelock._wrap._client import BLOCKED_TEXT, AsyncWrappedOpenAI, Content, WrappedOpenAI, wrap
from citelock._wrap._model import AnswerModel, answer_model

__all__ = ["BLOCKED_TEXT", "AnswerModel", "AsyncWrappedOpenAI", "Content", "WrappedOpenAI", "answer_model", "wrap"]
