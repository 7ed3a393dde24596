"""``ait replay`` on a run-shaped log, where every job belongs to an episode: does the cost per event stay flat?

log_bench's replay stream has jobs and no episodes, so the episodes projection stays empty there. In a run each
one-shot episode starts before its job, and the episodes projection holds every episode; a handler that visits
every episode per event makes a replay (and the live engine's fold) quadratic in the run's length, which that
stream cannot show. This writes logs of ``--episodes`` sizes, each episode an ``episode.started`` followed by
log_bench's eight job events (queued with that episode's id, started, four progress, cost, success), and times
``engine.replay.replay`` with the default projections (what ``ait replay`` runs) in a fresh process per
checkout. It prints CPU microseconds per event at each size and the largest size's over the smallest's (1.0: the
cost per event does not grow with the run).

    .venv/bin/python benchmarks/replay_episodes.py [--episodes 1000,8000] [--before-root DIR] [--repeat 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.log_bench import ait_replay_in_process, body
from events import EpisodeStarted, JobQueued, Recorded
from events.codec import RecordCodec

JOB_EVENTS = 8  # log_bench.body's cycle: one job's life


def write_run_log(path: Path, episodes: int) -> int:
    """A log of ``episodes`` one-shot episodes, each started before its job; returns the number of events."""
    codec = RecordCodec()
    seq = 0
    with path.open("wb") as f:
        for j in range(episodes):
            episode_id = f"ep-{j:07d}"
            started = EpisodeStarted(episode_id=episode_id, task_id=f"t{j}", family="calc_chain", policy="p")
            lines = [codec.encode(Recorded(seq, 1_764_460_800.0 + seq * 0.001, started))]
            seq += 1
            for k in range(JOB_EVENTS):
                ev = body(j * JOB_EVENTS + k)
                if isinstance(ev, JobQueued):
                    ev = msgspec.structs.replace(ev, episode_id=episode_id)
                lines.append(codec.encode(Recorded(seq, 1_764_460_800.0 + seq * 0.001, ev)))
                seq += 1
            f.write(b"".join(lines))
    return seq


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--episodes", default="1000,8000", help="log sizes in episodes (comma-separated)")
    ap.add_argument("--before-root", type=Path, default=None, help="a checkout of the code before a change")
    ap.add_argument("--repeat", type=int, default=3, help="runs per figure; the best is kept")
    args = ap.parse_args()
    here = Path(__file__).resolve().parents[1]
    roots = {"this checkout": here} | ({"--before-root": args.before_root.resolve()} if args.before_root else {})
    sizes = [int(s) for s in args.episodes.split(",")]
    with tempfile.TemporaryDirectory(prefix="replay-episodes-") as tmp:
        per_event: dict[str, list[float]] = {which: [] for which in roots}
        for size in sizes:
            path = Path(tmp) / f"{size}.jsonl"
            events = write_run_log(path, size)
            best: dict[str, float] = {}
            hashes = set()
            for _ in range(args.repeat):  # interleaved, so a disturbance hits both checkouts alike
                for which, root in roots.items():
                    cpu, digest = ait_replay_in_process(path, root)
                    best[which] = min(best.get(which, float("inf")), cpu)
                    hashes.add(digest)
            same = "same state hash" if len(hashes) == 1 else f"DIFFERENT state hashes {sorted(hashes)}"
            print(f"{size:,} episodes, {events:,} events ({same}):")
            for which, cpu in best.items():
                per_event[which].append(cpu / events * 1e6)
                print(f"  {which:14s} {cpu:7.2f} s CPU  {cpu / events * 1e6:7.2f} us/event")
        for which, costs in per_event.items():
            ratio = costs[-1] / costs[0]
            print(f"{which}: us/event at {sizes[-1]:,} episodes / at {sizes[0]:,}: {ratio:.2f} (1.0: flat)")


if __name__ == "__main__":
    main()
