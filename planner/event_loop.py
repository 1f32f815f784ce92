"""The simulator's event loop, compiled: every request's arrival, admission, prefill, decode and finish.

planner/simulate.py lays a fleet out in flat arrays (one row per replica, per host, per engine) and calls
`run`; this module holds only the loop, compiled by Numba (numba.pydata.org) to machine code, because the
loop is where the planner's time goes: a plan simulates millions of requests, and in CPython each cost
about twenty times the least a request-level simulation does (bench/plan_speed.py's reference loop).
Numba compiles without fast-math, so every float operation is the IEEE one CPython does, in the same order:
the outcomes are the interpreted loop's to the bit (tests/planner/test_pinned_outcomes.py holds them).

The rules (see simulate.py's docstring): least outstanding requests or round robin between hosts, the
host's least loaded replica, continuous batching with joins at decode step boundaries and prefill before
decode, or static batching; decode steps at the bucket of the batch's longest context. Events are batched:
a replica decoding a fixed batch jumps to its next completion, to the first step boundary after an arrival
it could admit, or to where its longest context outgrows its bucket.

Each replica's running batch is a small binary heap of (token count at which it ends, request), kept in
rows of two arrays; requests are unique, so its minimum is unique and any correct heap pops the same
order. Each replica's queue is a linked list through the requests (`next_queued`), in arrival order."""

from __future__ import annotations

import heapq
import math

import numpy as np
from numba import njit

NO_CONTEXT = -(1 << 62)  # a replica's longest running context when none runs
END = -1  # the end of a replica's queue


@njit(cache=True, inline="always")
def _before(key_a, request_a, key_b, request_b):
    return key_a < key_b or (key_a == key_b and request_a < request_b)


@njit(cache=True)
def _push(keys, requests, size, replica, key, request):
    """Push (key, request) on `replica`'s heap row; returns the row's new size."""
    at = size
    while at > 0:
        parent = (at - 1) >> 1
        if not _before(key, request, keys[replica, parent], requests[replica, parent]):
            break
        keys[replica, at] = keys[replica, parent]
        requests[replica, at] = requests[replica, parent]
        at = parent
    keys[replica, at] = key
    requests[replica, at] = request
    return size + 1


@njit(cache=True)
def _pop(keys, requests, size, replica):
    """Remove the row's minimum (the caller read it at column 0); returns the row's new size."""
    size -= 1
    key, request = keys[replica, size], requests[replica, size]
    at = 0
    while True:
        child = 2 * at + 1
        if child >= size:
            break
        if child + 1 < size and _before(
            keys[replica, child + 1],
            requests[replica, child + 1],
            keys[replica, child],
            requests[replica, child],
        ):
            child += 1
        if not _before(keys[replica, child], requests[replica, child], key, request):
            break
        keys[replica, at] = keys[replica, child]
        requests[replica, at] = requests[replica, child]
        at = child
    if size > 0:
        keys[replica, at] = key
        requests[replica, at] = request
    return size


@njit(cache=True)
def _bucket_index(buckets, count, longest):
    """bisect_left over the first `count` buckets."""
    low, high = 0, count
    while low < high:
        middle = (low + high) >> 1
        if buckets[middle] < longest:
            low = middle + 1
        else:
            high = middle
    return low


@njit(cache=True)
def run(
    arrival,  # float64[request], sorted
    output,  # int64[request]: tokens, the first one from the prefill
    tokens_in,  # int64[request]: the prompt as the KV cache holds it
    padded,  # int64[prefill bucket set, request]: the tokens each prompt is prefilled at
    replica_host,  # int64[replica]
    replica_engine,  # int64[replica]
    replica_padding,  # int64[replica]: its row of `padded`
    host_first,  # int64[host]: its first replica (a host's replicas are consecutive)
    host_replicas,  # int64[host]
    inv_prefill,  # float64[engine]: seconds per prefilled token
    cap,  # int64[engine]: max_num_seqs
    steps,  # float64[engine, batch]: decode step seconds without buckets
    bucket_count,  # int64[engine]: decode buckets (0: none)
    buckets,  # int64[engine, bucket]
    tables,  # float64[engine, bucket, batch]: decode step seconds per bucket
    least_outstanding,  # bool: least outstanding requests, else round robin
    static,  # bool: static batching, else continuous
    bounded,  # bool: the admission bound applies
    queued_limit,  # int64: requests a replica holds beyond its slots before it refuses
):
    count = len(arrival)
    replicas = len(replica_host)
    hosts = len(host_first)
    ttft = np.zeros(count)
    finish = np.zeros(count)
    served_by = np.zeros(count, dtype=np.int64)
    shed = np.zeros(count, dtype=np.bool_)
    offset = np.zeros(
        count, dtype=np.int64
    )  # decode buckets: a running request's context less its replica's steps
    next_queued = np.full(count, END, dtype=np.int64)

    host_out = np.zeros(hosts, dtype=np.int64)
    loads = np.zeros(replicas, dtype=np.int64)  # outstanding requests per replica
    widest = 1
    for engine in range(len(cap)):
        widest = max(widest, cap[engine])
    run_keys = np.zeros((replicas, widest), dtype=np.int64)
    run_requests = np.zeros((replicas, widest), dtype=np.int64)
    running = np.zeros(replicas, dtype=np.int64)
    queue_head = np.full(replicas, END, dtype=np.int64)
    queue_tail = np.full(replicas, END, dtype=np.int64)
    queued = np.zeros(replicas, dtype=np.int64)
    tokens = np.zeros(replicas, dtype=np.int64)  # decode steps run: each running sequence gains one a step
    longest_offset = np.full(replicas, NO_CONTEXT, dtype=np.int64)
    busy = np.zeros(replicas, dtype=np.bool_)
    decoding = np.zeros(replicas, dtype=np.bool_)
    decode_start = np.zeros(replicas)
    step_of = np.zeros(replicas)
    event_time = np.full(replicas, math.inf)
    # A decode step boundary whose admissions already ran: arrivals before it join the prefill that
    # starts there, while it has slots left.
    admit_until = np.full(replicas, -math.inf)
    admit_free = np.zeros(replicas, dtype=np.int64)

    # (time, key): key >= 0 is a replica's next step; key < 0 is request ~key ending (static batching only).
    events = [(0.0, 0)]
    events.pop()

    def enqueue(replica, request):
        if queue_tail[replica] == END:
            queue_head[replica] = request
        else:
            next_queued[queue_tail[replica]] = request
        queue_tail[replica] = request
        queued[replica] += 1

    def dequeue(replica):
        request = queue_head[replica]
        queue_head[replica] = next_queued[request]
        if queue_head[replica] == END:
            queue_tail[replica] = END
        queued[replica] -= 1
        return request

    def admit(replica, request):
        """Prefill `request` after the prompts already admitted at the replica's open step boundary (in
        arrival order, as continuous_step admits a queue) and move its event to the prefill's end."""
        engine = replica_engine[replica]
        steps_run = tokens[replica]
        time = event_time[replica] + padded[replica_padding[replica], request] * inv_prefill[engine]
        ttft[request] = time - arrival[request]
        running[replica] = _push(
            run_keys, run_requests, running[replica], replica, steps_run + output[request] - 1, request
        )
        if bucket_count[engine] > 0:
            context = tokens_in[request] + 1 - steps_run
            offset[request] = context
            if context > longest_offset[replica]:
                longest_offset[replica] = context
        admit_free[replica] -= 1
        event_time[replica] = time
        heapq.heappush(events, (time, replica))

    def continuous_step(replica, now):
        engine = replica_engine[replica]
        steps_run = tokens[replica]
        if decoding[replica]:
            steps_run += round((now - decode_start[replica]) / step_of[replica])
            tokens[replica] = steps_run
            decoding[replica] = False
        size = running[replica]
        if size > 0 and run_keys[replica, 0] <= steps_run:
            done = 0
            longest_left = False
            while size > 0 and run_keys[replica, 0] <= steps_run:
                request = run_requests[replica, 0]
                size = _pop(run_keys, run_requests, size, replica)
                finish[request] = now
                done += 1
                if offset[request] == longest_offset[replica]:
                    longest_left = True
            running[replica] = size
            host_out[replica_host[replica]] -= done
            loads[replica] -= done
            if longest_left and bucket_count[engine] > 0:
                longest = NO_CONTEXT
                for column in range(size):
                    longest = max(longest, offset[run_requests[replica, column]])
                longest_offset[replica] = longest
        free = cap[engine] - size
        if queued[replica] > 0 and free > 0:
            # Prefill first: each admitted prompt is encoded in turn and emits its first token.
            time = now
            row = replica_padding[replica]
            admitted = free if free < queued[replica] else queued[replica]
            longest = longest_offset[replica]
            for _ in range(admitted):
                request = dequeue(replica)
                time += padded[row, request] * inv_prefill[engine]
                ttft[request] = time - arrival[request]
                size = _push(run_keys, run_requests, size, replica, steps_run + output[request] - 1, request)
                if bucket_count[engine] > 0:
                    # Its context after the replica's next step: the prompt, the first token, the next.
                    context = tokens_in[request] + 1 - steps_run
                    offset[request] = context
                    if context > longest:
                        longest = context
            running[replica] = size
            longest_offset[replica] = longest
            event_time[replica] = time
            heapq.heappush(events, (time, replica))
        elif size > 0:
            to_go = run_keys[replica, 0] - steps_run  # to the next completion
            count = bucket_count[engine]
            if count > 0:
                longest = steps_run + longest_offset[replica]
                index = _bucket_index(buckets[engine], count, longest)
                if index < count:
                    # The batch runs at this bucket until its longest context outgrows it.
                    room = buckets[engine, index] - longest + 1
                    if room < to_go:
                        to_go = room
                else:
                    index = count - 1
                step = tables[engine, index, size]
            else:
                step = steps[engine, size]
            decoding[replica] = True
            decode_start[replica] = now
            step_of[replica] = step
            time = now + to_go * step
            event_time[replica] = time
            heapq.heappush(events, (time, replica))
        else:
            busy[replica] = False
            event_time[replica] = math.inf

    def static_batch(replica, now):
        if queued[replica] == 0:
            busy[replica] = False
            event_time[replica] = math.inf
            return
        engine = replica_engine[replica]
        size = min(cap[engine], queued[replica])
        batch = np.empty(size, dtype=np.int64)
        for member in range(size):
            batch[member] = dequeue(replica)
        time = now
        row = replica_padding[replica]
        longest = 0
        start = 0
        for member in range(size):
            request = batch[member]
            time += padded[row, request] * inv_prefill[engine]
            ttft[request] = time - arrival[request]
            longest = max(longest, output[request])
            start = max(start, tokens_in[request])
        # A static batch steps at its full size until its longest sequence ends; with decode buckets, at the
        # bucket of its longest context, which grows by one per step: elapsed[k] = time after k steps.
        elapsed = np.zeros(longest)
        count = bucket_count[engine]
        if count > 0:
            for step_number in range(1, longest):
                index = min(_bucket_index(buckets[engine], count, start + step_number), count - 1)
                elapsed[step_number] = elapsed[step_number - 1] + tables[engine, index, size]
        else:
            step = steps[engine, size]
            for k in range(longest):
                elapsed[k] = k * step
        for member in range(size):
            request = batch[member]
            done = time + elapsed[output[request] - 1]
            finish[request] = done
            heapq.heappush(events, (done, ~request))
        event_time[replica] = time + elapsed[longest - 1]
        heapq.heappush(events, (event_time[replica], replica))

    def advance(until):
        """Run every event due by `until`."""
        while len(events) > 0 and events[0][0] <= until:
            time, key = heapq.heappop(events)
            if key < 0:
                served = served_by[~key]
                host_out[replica_host[served]] -= 1
                loads[served] -= 1
            elif time == event_time[key]:  # otherwise an earlier boundary replaced this event
                if static:
                    static_batch(key, time)
                else:
                    continuous_step(key, time)

    for request in range(count):
        now = arrival[request]
        advance(now)
        # The first host with the fewest outstanding, and its least loaded replica, the first of equals.
        if least_outstanding:
            host = 0
            for other in range(1, hosts):
                if host_out[other] < host_out[host]:
                    host = other
        else:
            host = request % hosts
        replica = host_first[host]
        for other in range(host_first[host] + 1, host_first[host] + host_replicas[host]):
            if loads[other] < loads[replica]:
                replica = other
        served_by[request] = replica
        engine = replica_engine[replica]
        if bounded and loads[replica] >= cap[engine] + queued_limit:
            shed[request] = True
            ttft[request] = math.nan
            finish[request] = math.nan
            continue
        host_out[host] += 1
        loads[replica] += 1
        if not busy[replica]:
            # Every event up to now has run, so an idle engine starts on it at once.
            enqueue(replica, request)
            busy[replica] = True
            if static:
                static_batch(replica, now)
            else:
                continuous_step(replica, now)
        elif now < admit_until[replica] and admit_free[replica] > 0:
            # Before the boundary another arrival opened: join its prefill.
            admit(replica, request)
        elif decoding[replica] and running[replica] < cap[engine]:
            # Join at the next decode step boundary rather than at the next completion.
            start, step = decode_start[replica], step_of[replica]
            boundary = start + math.ceil((now - start) / step) * step
            if boundary < event_time[replica]:
                # The boundary's own event, run now rather than pushed: until it, only arrivals touch this
                # replica (its next completion is past the boundary, so none is due there), and those that
                # come before it join the same prefill; its arithmetic is the event's.
                tokens[replica] += round((boundary - start) / step)
                decoding[replica] = False
                admit_until[replica] = boundary
                admit_free[replica] = cap[engine] - running[replica]
                event_time[replica] = boundary  # the prefill starts here; _admit moves it to its end
                admit(replica, request)
            else:
                enqueue(replica, request)
        else:
            enqueue(replica, request)

    advance(math.inf)  # the fleet drains after the last arrival
    return ttft, finish, served_by, shed
