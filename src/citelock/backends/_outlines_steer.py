"""The llguidance steering of outlines' steerable models: one backend per model, one checked processor per request.

Split from :mod:`citelock.backends._outlines`. The processor records every engine error instead of only warning
(llama-cpp-python swallows exceptions raised inside its sampler callback), counts the tokens it sampled, and notes
when the first one was sampled.
"""

from __future__ import annotations

import time
import warnings
from typing import Any

from citelock.errors import MissingExtraError

__all__ = ["Steering", "checked_processor", "counting_processor"]


class Steering:
    """The llguidance backend of one steerable outlines model, built once: each request gets its own processor."""

    def __init__(self, model: Any, engine_limits: Any) -> None:
        try:
            import llguidance
            from outlines.backends.llguidance import LLGuidanceBackend
        except ImportError:
            raise MissingExtraError("outlines", "llguidance") from None
        from citelock.runtime._llama import parser_limits

        self.llg = llguidance
        with warnings.catch_warnings():  # llguidance calls a deprecated llama.cpp accessor once per token
            warnings.simplefilter("ignore", DeprecationWarning)
            self.backend = LLGuidanceBackend(model)
        self.limits = engine_limits if engine_limits is not None else parser_limits()
        self.tensor_library_name: str = model.tensor_library_name

    def processor(self, dialect: str, text: str) -> Any:
        """A fresh checked logits processor for a grammar (``dialect`` ``lark``) or a JSON Schema (``json_schema``).

        The dialect is explicit: llguidance's ``grammar_from("grammar", ...)`` would guess between Lark and GBNF.
        """
        spec = self.llg.grammar_from("lark" if dialect == "lark" else "json_schema", text)
        return checked_processor(spec, self.backend.llg_tokenizer, self.tensor_library_name, self.limits)


def checked_processor(grammar: str, tokenizer: Any, tensor_library_name: str, limits: Any) -> Any:
    """The llguidance logits processor of outlines, with ``limits`` and every engine error recorded, not only warned.

    The returned processor has ``error`` (None, or the first engine error: a rejected token, a matcher error, an
    exception inside the processor), ``calls`` (one per sampled token), ``mask_s`` (time spent in the processor,
    the matchers' setup at the first token included) and ``first_token_s(started)``. After an
    error only end-of-sequence is allowed, so decoding stops at once; the caller raises.
    """
    from outlines.backends.llguidance import LLGuidanceLogitsProcessor

    class CheckedProcessor(LLGuidanceLogitsProcessor):
        def __init__(self) -> None:
            super().__init__(grammar, tokenizer, tensor_library_name)
            self.error: str | None = None
            self.calls = 0
            self.first_call: float | None = None
            self.mask_s = 0.0

        def reset(self) -> None:
            self.is_first_token = True  # what outlines' reset does: the matchers are set up again
            self.error, self.calls, self.first_call, self.mask_s = None, 0, None, 0.0

        def _setup(self, batch_size: int) -> None:
            from llguidance import LLMatcher

            super()._setup(batch_size)
            self.ll_matchers = [LLMatcher(tokenizer, grammar, log_level=0, limits=limits) for _ in range(batch_size)]
            for matcher in self.ll_matchers:
                if matcher.is_error():
                    self._fail(f"llguidance refused the grammar: {matcher.get_error()}")

        def first_token_s(self, started: float) -> float | None:
            return None if self.first_call is None else max(self.first_call - started, 0.0)

        def _fail(self, message: str) -> None:
            if self.error is None:
                self.error = message

        def process_logits(self, input_ids: Any, logits: Any) -> Any:
            self.calls += 1
            tick = time.perf_counter()
            if self.first_call is None:
                self.first_call = tick
            try:
                if self.error is None:
                    biased = self._checked(input_ids, logits)
                    self.mask_s += time.perf_counter() - tick
                    return biased
            except Exception as exc:  # raised inside llama.cpp's callback it would be swallowed: keep it
                self._fail(f"{type(exc).__name__} in the logits processor: {exc}")
            logits[:] = float("-inf")  # only end-of-sequence: stop now, the caller raises
            logits[:, tokenizer.eos_token] = 0.0
            return logits

        def _checked(self, input_ids: Any, logits: Any) -> Any:
            if self.is_first_token:
                self._setup(len(input_ids))
                self.is_first_token = False
            else:
                for i, matcher in enumerate(self.ll_matchers):
                    token = int(input_ids[i][-1].item())
                    if not matcher.consume_token(token) or matcher.is_error():
                        self._fail(f"the engine rejected token {token}: {matcher.get_error()}")
            if self.error is not None:
                raise _EngineStopped
            biased = self._bias_logits(input_ids, logits)
            for matcher in self.ll_matchers:
                if matcher.is_error():
                    self._fail(f"engine error computing the mask: {matcher.get_error()}")
                    raise _EngineStopped
            return biased

    return CheckedProcessor()


def counting_processor(tensor_library_name: str) -> Any:
    """A logits processor that changes nothing and counts sampled tokens (accounting for unconstrained decoding)."""
    from outlines.processors.base_logits_processor import OutlinesLogitsProcessor

    class CountingProcessor(OutlinesLogitsProcessor):
        def __init__(self) -> None:
            super().__init__(tensor_library_name)
            self.error: str | None = None
            self.calls = 0
            self.first_call: float | None = None

        def reset(self) -> None:
            self.calls, self.first_call = 0, None

        def first_token_s(self, started: float) -> float | None:
            return None if self.first_call is None else max(self.first_call - started, 0.0)

        def process_logits(self, input_ids: Any, logits: Any) -> Any:
            self.calls += 1
            if self.first_call is None:
                self.first_call = time.perf_counter()
            return logits

    return CountingProcessor()


class _EngineStopped(Exception):
    """Internal: the engine failed; the processor switches to end-of-sequence only."""
