"""The pod agent's HTTP API, described once: an OpenAPI 3.1 document that the agent serves at ``/openapi.json``,
parses every request's parameters through, and the client encodes its parameters through.

Each operation's parameters (path and query) carry a JSON-schema subset: ``integer`` and ``number`` (finite,
with ``minimum``/``maximum``), ``string`` (``pattern``, ``maxLength``). :func:`parse_params` turns a request's
raw strings into typed values or raises :class:`BadParameter` with one line naming the parameter, which the
server answers with 400; an integer is digits only (``1e400``, ``inf``, ``nan``, ``1.5`` are refused, never
rounded or overflowed), a number is finite. Response bodies are described from the port's own msgspec structs,
so the document cannot drift from what the agent sends. The fuzzer (tests/adapters/test_fuzz_pod_api.py)
drives a real agent from this document.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

import msgspec

from handlers.ports.pod_agent import AgentEventsPage, AgentHealth, AgentJobStatus, AgentResult

__all__ = [
    "JOB_ID_PATTERN",
    "MAX_ATTEMPT",
    "MAX_TIME_BUDGET_S",
    "BadParameter",
    "encode_params",
    "openapi",
    "parse_params",
]

JOB_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$"
FAMILY_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
SHA256_PATTERN = r"^([0-9a-f]{64})?$"
MAX_ATTEMPT = 1000
MAX_TIME_BUDGET_S = 7 * 24 * 3600.0  # a week: no inner job on one pod runs longer
MAX_CURSOR = 2**31 - 1
MAX_WAIT_S = 600.0  # accepted; the agent caps a long poll at its own limit (60 s)


class BadParameter(ValueError):
    """A request parameter that does not fit its description: 400 with this one-line message."""


_JOB_ID = {
    "name": "job_id",
    "in": "path",
    "required": True,
    "description": "a job id: letters, digits, '_', '.', '-' (at most 128), starting with a letter or digit",
    "schema": {"type": "string", "pattern": JOB_ID_PATTERN},
}
_SHA = {
    "name": "sha256",
    "in": "query",
    "required": False,
    "description": "the body's SHA-256 as 64 lowercase hex digits (empty: not checked)",
    "schema": {"type": "string", "pattern": SHA256_PATTERN},
}

#: Parameters per operation id: the single source the server parses and the client encodes with.
PARAMS: dict[str, list[dict[str, Any]]] = {
    "health": [],
    "openapi": [],
    "submit": [
        _JOB_ID,
        {
            "name": "family",
            "in": "query",
            "required": True,
            "description": "the task family: lowercase letters, digits and '_' (at most 64)",
            "schema": {"type": "string", "pattern": FAMILY_PATTERN},
        },
        {
            "name": "attempt",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_ATTEMPT, "default": 1},
        },
        {
            "name": "time_budget_s",
            "in": "query",
            "required": False,
            "description": "0: no limit on the pod side",
            "schema": {"type": "number", "minimum": 0, "maximum": MAX_TIME_BUDGET_S, "default": 0},
        },
        _SHA,
    ],
    "status": [_JOB_ID],
    "events": [
        _JOB_ID,
        {
            "name": "cursor",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 0, "maximum": MAX_CURSOR, "default": 0},
        },
        {
            "name": "wait",
            "in": "query",
            "required": False,
            "schema": {"type": "number", "minimum": 0, "maximum": MAX_WAIT_S, "default": 0},
        },
    ],
    "result": [_JOB_ID],
    "cancel": [_JOB_ID],
    "eval": [_JOB_ID, _SHA],
}

_INT = re.compile(r"^[+-]?[0-9]{1,19}$")
_NUM = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]{1,3})?$")


def _parse_one(spec: Mapping[str, Any], raw: str) -> int | float | str:
    name, schema = spec["name"], spec["schema"]
    kind = schema["type"]
    shown = raw if len(raw) <= 40 else raw[:40] + "..."
    value: int | float | str
    if kind == "integer":
        if not _INT.match(raw):
            raise BadParameter(f"parameter {name}={shown!r}: expected an integer")
        value = int(raw)
    elif kind == "number":
        if not _NUM.match(raw):
            raise BadParameter(f"parameter {name}={shown!r}: expected a finite number")
        value = float(raw)
        if not math.isfinite(value):
            raise BadParameter(f"parameter {name}={shown!r}: expected a finite number")
    else:
        value = raw
        if "maxLength" in schema and len(raw) > schema["maxLength"]:
            raise BadParameter(f"parameter {name}: longer than {schema['maxLength']} characters")
        if "pattern" in schema and not re.match(schema["pattern"], raw):
            want = spec.get("description") or f"a string matching {schema['pattern']}"
            raise BadParameter(f"parameter {name}={shown!r}: expected {want}")
        return value
    lo, hi = schema.get("minimum"), schema.get("maximum")
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise BadParameter(f"parameter {name}={shown!r}: must be in [{lo:g}, {hi:g}]")
    return value


def parse_params(op: str, path: Mapping[str, str], query: Mapping[str, str]) -> dict[str, Any]:
    """The typed parameters of operation ``op`` from a request's path and query strings (defaults filled)."""
    out: dict[str, Any] = {}
    for spec in PARAMS[op]:
        name = spec["name"]
        raw = path.get(name) if spec["in"] == "path" else query.get(name)
        if raw is None or (raw == "" and spec["schema"]["type"] != "string"):
            if spec.get("required"):
                raise BadParameter(f"parameter {name} is required")
            out[name] = spec["schema"].get("default", "")
            continue
        out[name] = _parse_one(spec, raw)
    return out


def encode_params(op: str, values: Mapping[str, Any]) -> dict[str, str]:
    """The client's query for ``op``: every value checked against the same description, then as a string."""
    out: dict[str, str] = {}
    for spec in PARAMS[op]:
        if spec["in"] != "query" or spec["name"] not in values:
            continue
        value = values[spec["name"]]
        text = repr(float(value)) if spec["schema"]["type"] == "number" else str(value)
        try:
            _parse_one(spec, text)
        except BadParameter as exc:
            raise ValueError(f"pod agent request {op}: {exc}") from None
        out[spec["name"]] = text
    return out


def _schemas() -> tuple[dict[str, Any], dict[str, Any]]:
    types = (AgentHealth, AgentJobStatus, AgentEventsPage, AgentResult)
    refs, components = msgspec.json.schema_components(types, ref_template="#/components/schemas/{name}")
    return dict(zip(("health", "status", "events", "result"), refs, strict=True)), components


_ERROR = {
    "type": "object",
    "required": ["error", "detail"],
    "properties": {"error": {"type": "string"}, "detail": {"type": "string"}},
}


def _responses(ok: dict[str, Any], *codes: int, created: bool = False) -> dict[str, Any]:
    body = {"application/json": {"schema": ok}}
    out: dict[str, Any] = {"200": {"description": "ok", "content": body}}
    if created:
        out["201"] = {"description": "created", "content": body}
    err = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    reasons = {
        400: "a malformed request",
        401: "no valid bearer token",
        404: "no such job",
        409: "conflict",
        413: "too large",
    }
    for code in (400, 401, *codes):
        out[str(code)] = {"description": reasons[code], "content": err}
    return out


def openapi() -> dict[str, Any]:
    """The OpenAPI 3.1 document of the agent (served at ``GET /openapi.json``)."""
    refs, components = _schemas()
    components = {**components, "Error": _ERROR}
    tar = {"application/x-tar": {"schema": {"type": "string", "format": "binary"}}}

    def op(op_id: str, summary: str, responses: dict[str, Any], body: bool = False) -> dict[str, Any]:
        entry: dict[str, Any] = {"operationId": op_id, "summary": summary, "responses": responses}
        if PARAMS[op_id]:
            entry["parameters"] = PARAMS[op_id]
        if body:
            entry["requestBody"] = {"required": True, "content": tar}
        return entry

    return {
        "openapi": "3.1.0",
        "info": {"title": "ait pod agent", "version": "1"},
        "security": [{"bearer": []}],
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": components,
        },
        "paths": {
            "/health": {"get": op("health", "the agent's version, trainer and busy job", _responses(refs["health"]))},
            "/openapi.json": {"get": op("openapi", "this document", _responses({"type": "object"}))},
            "/jobs/{job_id}": {
                "post": op(
                    "submit",
                    "submit a job's bundle (idempotent by id)",
                    _responses(refs["status"], 409, 413, created=True),
                    body=True,
                ),
                "get": op("status", "a job's status", _responses(refs["status"], 404)),
            },
            "/jobs/{job_id}/events": {
                "get": op("events", "events after the cursor, long-polling", _responses(refs["events"], 404)),
            },
            "/jobs/{job_id}/result": {
                "get": op("result", "the result document", _responses(refs["result"], 404, 409)),
            },
            "/jobs/{job_id}/cancel": {
                "post": op("cancel", "stop the job", _responses(refs["status"], 404)),
            },
            "/jobs/{job_id}/eval": {
                "post": op("eval", "the hidden eval package", _responses(refs["status"], 404, 409, 413), body=True),
            },
        },
    }
