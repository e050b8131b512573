"""Step sizes set by time (service/store/steps.py): a step over its share of the target makes the next ones smaller
at once, cheaper steps let them grow back slowly (at most doubling a step), within bounds; a configured size never
moves; the registration threshold is the write step's size."""

from __future__ import annotations

from service.store.steps import LEAST, MOST, START, Steps, StepSizer


def test_before_any_measure_a_step_is_the_start_size():
    assert StepSizer(start=START).topics() == START


def test_a_step_over_its_share_makes_the_next_smaller_at_once():
    s = StepSizer(target_us=5_000)
    s.topics()
    s.took(1000, 20_000)  # 20 µs a topic: four times the target
    assert s.topics() == 250  # 5 ms / 20 µs
    s.took(250, 2_500)  # a cheap one (10 µs a topic) does not undo it at once
    assert 250 < s.topics() <= 500


def test_cheap_steps_grow_back_at_most_doubling_each_time():
    s = StepSizer(target_us=5_000)
    s.topics()
    s.took(1000, 50_000)  # 50 µs a topic
    sizes = [s.topics()]
    for _ in range(40):
        s.took(sizes[-1], sizes[-1] * 1.0)  # then 1 µs a topic
        sizes.append(s.topics())
    assert sizes[0] == 100
    assert all(b <= 2 * a for a, b in zip(sizes, sizes[1:], strict=False))
    assert sizes[5] < 1_000 and sizes[-1] >= 4_990  # 5 ms at 1 µs a topic, reached gradually


def test_sizes_are_bounded():
    s = StepSizer(target_us=5_000)
    s.took(10, 1_000_000)  # a step descheduled for a second
    assert s.topics() == LEAST
    fast = StepSizer(target_us=5_000)
    for _ in range(30):
        fast.took(fast.topics(), 1)
    assert fast.topics() == MOST


def test_a_configured_size_never_moves():
    s = StepSizer(fixed=10)
    s.took(10, 10_000_000)
    assert s.topics() == 10
    steps = Steps(fixed=10)
    assert steps.chunked_past() == 10 and steps.sweep_bound() == 10 and steps.expire.topics() == 5_000


def test_without_a_size_and_not_adaptive_nothing_goes_in_steps():
    steps = Steps()
    assert steps.chunked_past() == 0 and steps.sweep_bound() == 0


def test_the_registration_threshold_follows_the_write_steps():
    steps = Steps(fixed=1000, adaptive=True, target_ms=5)
    assert steps.chunked_past() == 1000
    steps.write.took(1000, 10_000)  # 10 µs a topic on this Redis
    assert steps.chunked_past() == 500  # a whole registration of 600 topics would take ~6 ms: in steps now
