#!/usr/bin/env python3
"""bench/sched_idle's analysis on a hand-made trace whose answers are known.

Two CPUs, workers A (pid 101, writer), B (102, reader), C (103, writer), D
(104, reader), E (105, reader) and F (106, reader), times in ms:
  cpu 0: A 0-5, preempted by E (A stays runnable, queued on cpu 0); E 5-6;
         C 6-10; D 10-11.
  cpu 1: B 0-2, then sleeps; idle 2-8; A 8-10 (moved from cpu 0's queue
         to cpu 1's at 7); idle 10-10.5; F 10.5-11.
  C is woken at 3 and E at 4 into cpu 0's queue, while A runs there and
  cpu 1 is idle; D at 9 into cpu 0's queue while both cores are busy; F at
  10.2 into cpu 1's queue, while cpu 1 is idle (it waits for that core to
  wake up, not for another core).
So cpu 1 idles 6.5 ms, 4 of them (3-7) with a worker queued on cpu 0 (C
3-6, E 4-5, A 5-7: they overlap, and overlaps count once; A's wait in
cpu 1's own queue from 7 and F's do not count); cpu 0 never idles; the busy core ran writers
for 5 of those 6.5 ms; two wake-ups (C's, E's) went to a busy core while
the other idled and waited 3 and 1 ms, the other two (D's, F's) did not,
and waited 1 and 0.3 ms. Run by ci/bench_test.
"""
import importlib.machinery
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def load_tool():
    loader = importlib.machinery.SourceFileLoader("sched_idle", os.path.join(HERE, "sched_idle"))
    spec = importlib.util.spec_from_loader("sched_idle", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def switch(cpu, ms, prev, state, nxt):
    return (f"[{cpu:03d}] {1000 + ms / 1000:.6f}:       sched:sched_switch: prev_comm=x "
            f"prev_pid={prev} prev_prio=120 prev_state={state} ==> next_comm=y next_pid={nxt} "
            "next_prio=120")


def waking(cpu, ms, pid, target):
    return (f"[{cpu:03d}] {1000 + ms / 1000:.6f}:       sched:sched_waking: comm=z pid={pid} "
            f"prio=120 target_cpu={target:03d}")


def migrate(cpu, ms, pid, orig, dest):
    return (f"[{cpu:03d}] {1000 + ms / 1000:.6f}: sched:sched_migrate_task: comm=m pid={pid} "
            f"prio=120 orig_cpu={orig} dest_cpu={dest}")


TRACE = "\n".join([
    switch(0, 0, 0, "R", 101),
    switch(1, 0, 0, "R", 102),
    switch(1, 2, 102, "S", 0),
    waking(0, 3, 103, 0),
    waking(0, 4, 105, 0),
    switch(0, 5, 101, "R", 105),
    switch(0, 6, 105, "S", 103),
    migrate(1, 7, 101, 0, 1),
    switch(1, 8, 0, "R", 101),
    waking(0, 9, 104, 0),
    switch(0, 10, 103, "S", 104),
    switch(1, 10, 101, "S", 0),
    waking(0, 10.2, 106, 1),
    switch(1, 10.5, 0, "R", 106),
    switch(0, 11, 104, "S", 0),
    switch(1, 11, 106, "S", 0),
    "an unrelated line that the parser must skip",
])


def main():
    tool = load_tool()
    switches, wakings, migrations, created = tool.parse(TRACE)
    if (len(switches), len(wakings), len(migrations), len(created)) != (11, 4, 1, 0):
        print(f"sched_idle_test: FAILED; parsed {switches} {wakings} {migrations} {created}")
        return 1
    roles = {101: "W", 102: "R", 103: "W", 104: "R", 105: "R", 106: "R"}
    lines = tool.analyse(switches, wakings, migrations, set(roles), roles, 2, trim=0.0)
    text = "\n".join(lines)
    expected = [
        "window analysed: 11 ms",
        "cpu 0: idle     0.0 ms ( 0.0%),     0.0 ms of it with a worker queued on another core",
        "cpu 1: idle     6.5 ms (59.1%),     4.0 ms of it with a worker queued on another core; "
        "6.0 ms in stretches of 1 ms or more",
        "every core idle at once: 0.0 ms",
        "on the other cores while one idled: W 77%, R 23%",
        "wake-ups to a busy core while another idled: 2, run-queue wait 4.0 ms",
        "wake-ups elsewhere: 2, run-queue wait 1.3 ms",
    ]
    missing = [e for e in expected if e not in text]
    if missing:
        print("sched_idle_test: FAILED; missing:\n  " + "\n  ".join(missing) + "\nin:\n" + text)
        return 1
    print("sched_idle_test: the analysis of a known trace is right (%d checks)" % len(expected))
    return 0


if __name__ == "__main__":
    sys.exit(main())
