#!/usr/bin/env python3
"""bench/sched_idle's analysis on a hand-made trace whose answers are known.

Two CPUs, workers A (pid 101, writer), B (102, reader), C (103, writer), D
(104, reader) and E (105, reader), times in ms:
  cpu 0: A 0-5, preempted by E (A stays runnable); E 5-6; C 6-10; D 10-11.
  cpu 1: B 0-2, then sleeps; idle 2-8; A 8-10; idle 10-11.
  C is woken at 3 and E at 4, on cpu 0 while A runs there and cpu 1 is
  idle; D at 9 on cpu 0 while both cores are busy.
So cpu 1 idles 7 ms, 5 of them (3-8) with a worker runnable on cpu 0 (C
3-6, E 4-5, A from its preemption at 5 to 8: they overlap, and overlaps
count once); cpu 0 never idles; the busy core ran writers for 5 of those
7 ms; two wake-ups (C's, E's) went to a busy core while the other idled
and waited 3 and 1 ms, the other (D's) did not, and waited 1 ms. Run by ci/bench_test.
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


def waking(cpu, ms, pid):
    return (f"[{cpu:03d}] {1000 + ms / 1000:.6f}:       sched:sched_waking: comm=z pid={pid} "
            f"prio=120 target_cpu={cpu:03d}")


TRACE = "\n".join([
    switch(0, 0, 0, "R", 101),
    switch(1, 0, 0, "R", 102),
    switch(1, 2, 102, "S", 0),
    waking(0, 3, 103),
    waking(0, 4, 105),
    switch(0, 5, 101, "R", 105),
    switch(0, 6, 105, "S", 103),
    switch(1, 8, 0, "R", 101),
    waking(0, 9, 104),
    switch(0, 10, 103, "S", 104),
    switch(1, 10, 101, "S", 0),
    switch(0, 11, 104, "S", 0),
    "an unrelated line that the parser must skip",
])


def main():
    tool = load_tool()
    switches, wakings, created = tool.parse(TRACE)
    if (len(switches), len(wakings), len(created)) != (9, 3, 0):
        print(f"sched_idle_test: FAILED; parsed {switches} {wakings} {created}")
        return 1
    roles = {101: "W", 102: "R", 103: "W", 104: "R", 105: "R"}
    lines = tool.analyse(switches, wakings, set(roles), roles, 2, trim=0.0)
    text = "\n".join(lines)
    expected = [
        "window analysed: 11 ms",
        "cpu 0: idle     0.0 ms ( 0.0%),     0.0 ms of it with a worker runnable elsewhere",
        "cpu 1: idle     7.0 ms (63.6%),     5.0 ms of it with a worker runnable elsewhere; "
        "7.0 ms in stretches of 1 ms or more",
        "every core idle at once: 0.0 ms",
        "on the other cores while one idled: W 71%, R 29%",
        "wake-ups to a busy core while another idled: 2, run-queue wait 4.0 ms",
        "wake-ups elsewhere: 1, run-queue wait 1.0 ms",
    ]
    missing = [e for e in expected if e not in text]
    if missing:
        print("sched_idle_test: FAILED; missing:\n  " + "\n  ".join(missing) + "\nin:\n" + text)
        return 1
    print("sched_idle_test: the analysis of a known trace is right (%d checks)" % len(expected))
    return 0


if __name__ == "__main__":
    sys.exit(main())
