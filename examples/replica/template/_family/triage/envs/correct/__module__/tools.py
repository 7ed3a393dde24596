"""The on-call tools, exactly as the hidden eval serves them (names, parameters, descriptions, results).

verifiers starts this module as its own process (``python -m triage_train.tools``): one server shared by all
rollouts. ``self.state`` is the calling rollout's ``TriageState`` (its task's services, incidents and deploys),
pulled from the rollout's state channel for each call. Service names ignore case and stray spaces. An unknown
service returns ``error: ...`` as the result text, as in the eval.
"""

# No `from __future__ import annotations` here: the tool server builds each tool's schema from its annotations at
# run time, and string annotations it cannot resolve (Literal, Annotated) would break it.
from typing import Annotated, Any

import verifiers.v1 as vf
from pydantic import Field

from . import TriageState

__all__ = ["OnCallTools"]


def _hhmm(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


class OnCallTools(vf.Toolset[vf.SharedToolsetConfig, TriageState]):
    TOOL_PREFIX = None  # bare tool names (get_service, not on_call_tools_get_service), as in the eval

    def _service(self, name: str) -> str | None:
        key = name.strip().lower()
        return key if key in self.state.services else None

    @vf.tool
    def list_incidents(self, service: Annotated[str, Field(description="the service name")]) -> str:
        """List a service's incidents today, newest first: id, status, severity and when it opened."""
        key = self._service(service)
        if key is None:
            return f"error: no service {service!r}"
        rows: list[dict[str, Any]] = [i for i in self.state.incidents if i["service"] == key]
        rows.sort(key=lambda i: -int(i["opened"]))  # stable, like the eval's sorted()
        lines = [f"{i['id']} {i['status']} sev{i['sev']} opened {_hhmm(int(i['opened']))}" for i in rows]
        return "\n".join(lines) or "no incidents"

    @vf.tool
    def get_service(self, name: Annotated[str, Field(description='the service name, e.g. "checkout"')]) -> str:
        """Get a service's owning team, its on-call engineer and the services it depends on."""
        key = self._service(name)
        if key is None:
            return f"error: no service {name!r}"
        record = self.state.services[key]
        deps = ", ".join(record["depends_on"]) or "none"
        return f"{key}: team={record['team']}; oncall={record['oncall']}; depends_on={deps}"

    @vf.tool
    def list_deploys(self, service: Annotated[str, Field(description="the service name")]) -> str:
        """List a service's deploys today, newest first: deploy id and time."""
        key = self._service(service)
        if key is None:
            return f"error: no service {service!r}"
        rows: list[dict[str, Any]] = [d for d in self.state.deploys if d["service"] == key]
        rows.sort(key=lambda d: -int(d["at"]))
        return "\n".join(f"{d['id']} at {_hhmm(int(d['at']))}" for d in rows) or "no deploys"


if __name__ == "__main__":
    OnCallTools.run()
