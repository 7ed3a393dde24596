"""Test support for the Runpod adapter: the v2 OpenAPI spec as JSON Schema validators, its examples,
and a scripted fake of the pod endpoints served through ``httpx.MockTransport``.

The spec is a copy of ``shared/reference/runpod-openapi-v2.json`` kept at
``fixtures/runpod/openapi-v2.json`` so the suite runs without the shared folder.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import jsonschema
import referencing
import referencing.jsonschema

SPEC_PATH = Path(__file__).resolve().parents[2] / "fixtures" / "runpod" / "openapi-v2.json"
_SPEC_URI = "urn:runpod:openapi-v2"


@cache
def spec() -> dict[str, Any]:
    return json.loads(SPEC_PATH.read_text())


@cache
def _registry() -> referencing.Registry[Any]:
    # OpenAPI 3.1 schemas are JSON Schema 2020-12; registering the whole document lets every
    # "#/components/..." $ref inside it resolve.
    resource = referencing.Resource.from_contents(spec(), default_specification=referencing.jsonschema.DRAFT202012)
    return referencing.Registry().with_resource(_SPEC_URI, resource)


def validator(pointer: str) -> jsonschema.Draft202012Validator:
    """A validator for the schema at JSON pointer ``pointer`` (e.g. ``/components/schemas/Pod``)."""
    return jsonschema.Draft202012Validator({"$ref": f"{_SPEC_URI}#{pointer}"}, registry=_registry())


def schema_validator(name: str) -> jsonschema.Draft202012Validator:
    return validator(f"/components/schemas/{name}")


def operation(method: str, path: str) -> dict[str, Any]:
    return spec()["paths"][path][method.lower()]


def _deref(node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = spec()
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def response_example(method: str, path: str, status: str) -> dict[str, Any]:
    """The first example body of a documented response (deep-copied, so tests may mutate it)."""
    response = _deref(operation(method, path)["responses"][status])
    content = next(iter(response["content"].values()))
    return copy.deepcopy(next(iter(content["examples"].values()))["value"])


def response_schema_pointer(method: str, path: str, status: str) -> str:
    response = _deref(operation(method, path)["responses"][status])
    content = next(iter(response["content"].values()))
    ref: str = content["schema"]["$ref"]
    return ref.removeprefix("#")


def parameters(method: str, path: str) -> dict[str, tuple[dict[str, Any], jsonschema.Draft202012Validator]]:
    """The operation's query parameters by name: (parameter object, validator of its schema)."""
    found = {}
    escaped = path.replace("~", "~0").replace("/", "~1")
    for i, entry in enumerate(operation(method, path).get("parameters", [])):
        inline = f"/paths/{escaped}/{method.lower()}/parameters/{i}"
        pointer = entry["$ref"].removeprefix("#") if "$ref" in entry else inline
        param = _deref(entry)
        if param["in"] == "query":
            found[param["name"]] = (param, validator(f"{pointer}/schema"))
    return found


def pod_example(**overrides: Any) -> dict[str, Any]:
    """The spec's ``getPod`` 200 example with some fields replaced."""
    pod = response_example("GET", "/v2/pods/{id}", "200")
    pod.update(overrides)
    return pod


def problem(status: int, detail: str, title: str = "Error") -> dict[str, Any]:
    return {"title": title, "status": status, "detail": detail}


Script = Callable[[httpx.Request], httpx.Response | None]


class FakeRunpod:
    """An in-memory Runpod v2 pod API. ``script`` entries answer requests first (one each, in order).

    A script entry returns a response, or None to let the fake serve the request normally; it may
    raise an ``httpx`` transport error to simulate a network failure.
    """

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.requests: list[httpx.Request] = []
        self.script: list[Script] = []
        self._next = 0

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def add_pod(self, name: str, status: str = "RUNNING", pod_id: str | None = None) -> dict[str, Any]:
        self._next += 1
        pid = pod_id or f"pod{self._next:04d}"
        pod = pod_example(id=pid, name=name, status=status, ports=["8000/http"])
        self.pods[pid] = pod
        return pod

    def count(self, method: str, path_prefix: str = "/v2/pods") -> int:
        return sum(1 for r in self.requests if r.method == method and r.url.path.startswith(path_prefix))

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.script:
            scripted = self.script.pop(0)(request)
            if scripted is not None:
                return scripted
        return self.serve(request)

    def serve(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v2/pods" and request.method == "GET":
            return httpx.Response(200, json={"pods": list(self.pods.values())})
        if path == "/v2/pods" and request.method == "POST":
            body = json.loads(request.content)
            pod = self.add_pod(body["name"], status="PROVISIONING")
            pod["gpu"] = {"id": body["gpu"]["id"], "count": body["gpu"]["count"]}
            pod["ports"] = body.get("ports", [])
            return httpx.Response(201, json=pod)
        if path.startswith("/v2/pods/"):
            pid = path.removeprefix("/v2/pods/")
            if pid not in self.pods:
                return httpx.Response(404, json=problem(404, "pod not found", "Not Found"))
            if request.method == "GET":
                return httpx.Response(200, json=self.pods[pid])
            if request.method == "DELETE":
                del self.pods[pid]
                return httpx.Response(204)
        if path == "/v2/billing" and request.method == "GET":
            return httpx.Response(200, json=response_example("GET", "/v2/billing", "200"))
        if path.startswith("/v2/catalog/gpus"):
            if path == "/v2/catalog/gpus":
                return httpx.Response(200, json=response_example("GET", "/v2/catalog/gpus", "200"))
            return httpx.Response(200, json=response_example("GET", "/v2/catalog/gpus/{id}", "200"))
        return httpx.Response(404, json=problem(404, f"no route {request.method} {path}", "Not Found"))


def respond(status: int, body: Any = None, headers: dict[str, str] | None = None) -> Script:
    """A script entry answering with ``status`` (a problem document by default)."""

    def answer(request: httpx.Request) -> httpx.Response:
        payload = body if body is not None else problem(status, f"scripted {status}")
        if isinstance(payload, str):
            return httpx.Response(status, text=payload, headers=headers)
        return httpx.Response(status, json=payload, headers=headers)

    return answer


def fail_network(exc_type: type[httpx.TransportError] = httpx.ConnectError) -> Script:
    def answer(request: httpx.Request) -> httpx.Response:
        raise exc_type("simulated network failure", request=request)

    return answer


def passthrough(request: httpx.Request) -> None:
    return None


class Sleeps:
    """An injected sleep that records the delays instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)
