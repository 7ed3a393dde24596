"""A local OpenAI-compatible chat-completions server whose answers come from a pluggable policy.

It speaks what the verifiers eval client needs (SSE chunks for ``stream=true``, ending in
``data: [DONE]``) and plain ``chat.completion`` JSON for other clients. Use it in-process::

    async with OpenAIServer(ReferencePolicy(family, tasks)) as server:
        ...  # point a client at server.base_url; server.requests holds what it received

or as a subprocess (it prints its bound URL on the first stdout line)::

    python -m adapters.openai_server --family calc_chain --policy reference --port 0

The wire format (:mod:`._protocol`, :mod:`._chunks`) is independent of the policy, so a model-backed
server can reuse it.
"""

from __future__ import annotations

from ._app import RecordedRequest, ServerState, build_app
from ._chunks import DONE, ChunkStream, completion_body, error_body, estimate_usage, reply_chunks
from ._policies import (
    NONSENSE,
    Mismatch,
    NonsensePolicy,
    Policy,
    PolicyError,
    ReferencePolicy,
    RequestRefused,
    ScriptedPolicy,
)
from ._protocol import (
    ChatRequest,
    Message,
    MessageToolCall,
    Reply,
    RequestError,
    ToolCall,
    ToolSpec,
    Usage,
    parse_chat_request,
)
from ._server import OpenAIServer, serve_app

__all__ = [
    "DONE",
    "NONSENSE",
    "ChatRequest",
    "ChunkStream",
    "Message",
    "MessageToolCall",
    "Mismatch",
    "NonsensePolicy",
    "OpenAIServer",
    "Policy",
    "PolicyError",
    "RecordedRequest",
    "ReferencePolicy",
    "Reply",
    "RequestError",
    "RequestRefused",
    "ScriptedPolicy",
    "ServerState",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "build_app",
    "completion_body",
    "error_body",
    "estimate_usage",
    "parse_chat_request",
    "reply_chunks",
    "serve_app",
]
