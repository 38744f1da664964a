"""Native citation adapters: answers whose citations a provider computed become citelock :class:`Answer` records.

The same guard and metrics then apply to them. One module per provider: Anthropic Citations, Cohere chat
citations, OpenAI file-search annotations. Each also rebuilds a :class:`PromptRecord` from the request, with
every provider-side document flattened into a message of role ``document``.
"""

from citelock.adapters._anthropic import anthropic_record, from_anthropic
from citelock.adapters._cohere import cohere_record, from_cohere
from citelock.adapters._openai_files import from_openai_file_search, openai_file_search_record

__all__ = [
    "anthropic_record",
    "cohere_record",
    "from_anthropic",
    "from_cohere",
    "from_openai_file_search",
    "openai_file_search_record",
]
