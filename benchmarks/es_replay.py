"""The ``eventsourcing`` library's replay of the same events, for benchmarks/log_bench.py's side-by-side figure.

Runs in an environment that has ``eventsourcing`` (it imports nothing from this project, so it can be a separate
virtual environment):

    uv venv /tmp/es-venv && uv pip install --python /tmp/es-venv/bin/python "eventsourcing==9.5.*"
    /tmp/es-venv/bin/python benchmarks/es_replay.py LOG.jsonl        # prints one JSON line

Setup (not timed): every record of our log (one line of JSONL each, read with ``json``) becomes one of the
library's domain events (a frozen dataclass per event type, the same fields), stored through its ``Mapper``
(the JSON transcoder) in its fastest store, the in-memory ``POPOApplicationRecorder``, one aggregate per job.
Timed (CPU): what a replay does there: read every notification in order (pages of 10,000), turn each back into
a domain event with the mapper, and fold it into the same two projections as log_bench's own replay (job status,
spend by kind). The library's own decoding is checked against ours: the same count and the same folds.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import sys
import time
import uuid
from typing import Any

from eventsourcing.domain import DomainEvent
from eventsourcing.persistence import (
    DatetimeAsISO,
    DecimalAsStr,
    JSONTranscoder,
    Mapper,
    StoredEvent,
    UUIDAsHex,
)
from eventsourcing.popo import POPOApplicationRecorder

_NS = uuid.UUID("5b0f8ad0-2f47-4a55-9f3e-0c2f4f6e7a10")
_CLASSES: dict[str, type[DomainEvent]] = {}


def _event_class(name: str, fields: list[str]) -> type[DomainEvent]:
    """A frozen dataclass domain event per event type, with the body's fields (and the record's seq, ts)."""
    cls = _CLASSES.get(name)
    if cls is None:
        spec = [("seq", int), ("ts", float), *((f, Any) for f in sorted(fields))]
        cls = dataclasses.make_dataclass(
            "E_" + name.replace(".", "_"), spec, bases=(DomainEvent,), frozen=True, namespace={"__module__": __name__}
        )
        globals()[cls.__name__] = cls  # the mapper resolves a stored event's topic to its class by name
        _CLASSES[name] = cls
    return cls


def load(path: str, mapper: Mapper[uuid.UUID]) -> tuple[POPOApplicationRecorder, int]:
    recorder = POPOApplicationRecorder()
    versions: dict[str, int] = {}
    batch: list[StoredEvent] = []
    n = 0
    with open(path, "rb") as f:
        for line in f:
            rec = json.loads(line)
            body = rec["body"]
            job = str(body.get("job_id") or body.get("ref") or "run")
            version = versions.get(job, 0) + 1
            versions[job] = version
            cls = _event_class(rec["type"], list(body))
            ev = cls(
                originator_id=uuid.uuid5(_NS, job),
                originator_version=version,
                timestamp=DomainEvent.create_timestamp(),
                seq=rec["seq"],
                ts=rec["ts"],
                **body,
            )
            batch.append(mapper.to_stored_event(ev))
            n += 1
            if len(batch) == 10_000:
                recorder.insert_events(batch)
                batch = []
    if batch:
        recorder.insert_events(batch)
    return recorder, n


Folded = tuple[int, dict[str, str], dict[str, float]]


def replay(recorder: POPOApplicationRecorder, mapper: Mapper[uuid.UUID]) -> Folded:
    status: dict[str, str] = {}
    spend: dict[str, float] = {}
    names = {cls: name for name, cls in _CLASSES.items()}
    count = 0
    start = 1
    while True:
        page = recorder.select_notifications(start, 10_000)
        if not page:
            break
        for notification in page:
            ev: Any = mapper.to_domain_event(notification)
            name = names[type(ev)]
            if name == "job.queued":
                status[ev.job_id] = "queued"
            elif name == "job.started":
                status[ev.job_id] = "running"
            elif name == "job.succeeded":
                status[ev.job_id] = "succeeded"
            elif name == "cost.settled":
                spend[ev.kind] = spend.get(ev.kind, 0.0) + ev.usd
            elif name == "job.progressed":
                spend["steps"] = spend.get("steps", 0.0) + 1
        count += len(page)
        start = page[-1].id + 1
    return count, status, spend


def main() -> None:
    path = sys.argv[1]
    transcoder = JSONTranscoder()
    for t in (UUIDAsHex(), DecimalAsStr(), DatetimeAsISO()):
        transcoder.register(t)
    mapper: Mapper[uuid.UUID] = Mapper(transcoder=transcoder)
    recorder, n = load(path, mapper)
    best = float("inf")
    result: Folded = (0, {}, {})
    for _ in range(int(sys.argv[2]) if len(sys.argv) > 2 else 1):
        gc.collect()
        cpu = time.process_time()
        result = replay(recorder, mapper)
        best = min(best, time.process_time() - cpu)
    count, status, spend = result
    assert count == n, f"replayed {count} of {n}"
    print(json.dumps({"events": n, "cpu_s": best, "jobs": len(status), "spend": spend}))


if __name__ == "__main__":
    main()
