"""How many topics each step of a worker's bulk work takes: sized by what its steps cost on this Redis, measured as
they run, so that no script holds Redis long on a slow machine or under load, nor takes needlessly many calls on a
fast one.

A broker's large registration goes in steps (chunked.py), and so do the removals and expiry of large brokers
(sweeps.py); a step once took a fixed 1 000 topics whatever the machine, and on a busy 2-core host two changed
100 000-topic registrations ran commands of up to 27 ms against DESIGN §9's 20 ms bound. Now each step script
reports its own Redis time (TIME at its start and end, so what it waited for in Redis's queue is not counted, but
time Redis spent descheduled is), and the next step of its kind is sized to land near TARGET_MS: a step that took
longer than its share makes the next ones smaller at once, cheaper ones let them grow back slowly (at most
doubling), within [LEAST, MOST]. One sizer per kind of step — writing a registration's topics, its final walk,
sweeping a removed broker's topics, expiring brokers, writing a batch of acknowledged heartbeats, reading a chunk of
the cluster info (these two count brokers, not topics) — since their costs per topic differ; per worker, no shared
state. The step size of registrations is also the threshold past which a registration goes in steps at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field

TARGET_MS = 5.0  # a step's Redis time aimed at: a step 3-4x as long as expected still stays under 20 ms
LEAST = 100  # topics: below this the calls' fixed cost dominates
MOST = 20_000
START = 1_000  # before anything was measured (the fixed size steps had)
EXPIRE_START = 5_000  # topics the expiry scan removes per call before it measured (its fixed budget before)
TOUCH_START = 2_000  # heartbeats per touchLive call before it measured (the fixed count it had)
CLUSTER_INFO_START = 500  # brokers per clusterInfoStep call before it measured (~2-4 ms on a 2-core host)
GROWTH = 2.0  # at most this factor up from one step to the next
EASE = 0.3  # weight of a cheaper step in the running cost per topic


@dataclass
class StepSizer:
    """Topics per step of one kind: `topics()` for the next one, `took()` with what the last one cost."""

    fixed: int = 0  # > 0: always this many (a configured step size, tests); 0: sized by time
    start: int = START
    target_us: float = TARGET_MS * 1000
    us_per_topic: float | None = None  # running cost per topic, None until a step was measured
    last: int = field(default=0, init=False)

    def topics(self) -> int:
        if self.fixed:
            return self.fixed
        if self.us_per_topic is None:
            size = self.start
        else:
            size = int(self.target_us / self.us_per_topic)
            if self.last:
                size = min(size, int(self.last * GROWTH))
        self.last = max(LEAST, min(MOST, size))
        return self.last

    def took(self, topics: int, elapsed_us: float) -> None:
        """A step of `topics` topics (or entries) ran `elapsed_us` µs in Redis."""
        if self.fixed or topics <= 0:
            return
        per = max(elapsed_us, 1.0) / topics
        if self.us_per_topic is None or per > self.us_per_topic:
            self.us_per_topic = per  # a step over its share: the next ones smaller at once
        else:
            self.us_per_topic += EASE * (per - self.us_per_topic)


class Steps:
    """One worker's step sizers. `fixed` > 0: every step that many topics (and registrations past it in steps),
    as a configured registration_chunk_topics asks; 0 with `adaptive`: sized by time."""

    def __init__(self, fixed: int = 0, adaptive: bool = False, target_ms: float = TARGET_MS) -> None:
        size = 0 if adaptive else fixed
        target = target_ms * 1000
        self.adaptive = adaptive
        self.write = StepSizer(size, fixed or START, target)  # registerChunk; guardTopics (reads) alike
        self.finish = StepSizer(0 if adaptive else START, START, target)  # registerFinish's walk of its topics
        self.sweep = StepSizer(size, fixed or START, target)  # sweepBroker, and the bound past which removals sweep
        self.expire = StepSizer(0 if adaptive else EXPIRE_START, EXPIRE_START, target)  # expireBrokers' budget
        self.touch = StepSizer(0 if adaptive else TOUCH_START, TOUCH_START, target)  # touchLive's heartbeats
        # clusterInfoStep's brokers: a configured step size takes that many, as sweeps take that many topics
        self.cluster_info = StepSizer(0 if adaptive else fixed or CLUSTER_INFO_START, CLUSTER_INFO_START, target)

    def kinds(self) -> list[tuple[str, StepSizer]]:
        return [("write", self.write), ("finish", self.finish), ("sweep", self.sweep), ("expire", self.expire),
                ("touch", self.touch),
                ("cluster_info", self.cluster_info)]

    def chunked_past(self) -> int:
        """Registrations with more topics go in steps (0: never)."""
        return self.write.topics() if self.adaptive or self.write.fixed else 0

    def sweep_bound(self) -> int:
        """Removals of brokers with more topics go in steps (0: never)."""
        return self.sweep.topics() if self.adaptive or self.sweep.fixed else 0
