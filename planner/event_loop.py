"""The simulator's event loop, compiled: every request's arrival, admission, prefill, decode and finish.

planner/simulate.py lays a fleet out in flat arrays (one row per replica, per host, per engine) and calls
`run` (or `run_mixed`, for engines with vLLM's mixed scheduler, stepped pass by pass; the plans never
call it); this module holds only the loops, compiled by Numba (numba.pydata.org) to machine code, because the
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


@njit(cache=True, inline="always")
def _append(queue_head, queue_tail, next_queued, replica, request):
    """Put `request` at the end of the replica's queue (a linked list through the requests)."""
    if queue_tail[replica] == END:
        queue_head[replica] = request
    else:
        next_queued[queue_tail[replica]] = request
    queue_tail[replica] = request


@njit(cache=True, inline="always")
def _take(queue_head, queue_tail, next_queued, replica):
    """The request at the head of the replica's queue, unlinked."""
    request = queue_head[replica]
    queue_head[replica] = next_queued[request]
    if queue_head[replica] == END:
        queue_tail[replica] = END
    return request


@njit(cache=True, inline="always")
def _shed(shed, ttft, finish, request):
    """Mark `request` shed: no first token, no finish."""
    shed[request] = True
    ttft[request] = math.nan
    finish[request] = math.nan


@njit(cache=True)
def _choose(request, least_outstanding, host_out, host_first, host_replicas, loads):
    """(host, replica) for a request: the first host with the fewest outstanding (or round robin), and its
    least loaded replica, the first of equals. Both loops' balancer."""
    hosts = len(host_first)
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
    return host, replica


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
    wait_bounded,  # bool: the queue-wait budget applies
    wait_budget,  # float64: seconds from arrival by which a queued request must have its first token
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
    # Came while its replica held all its slots: only these wait for a slot, and only these does the
    # container hold to the queue-wait budget (container/serving/streaming_model.py).
    over_slots = np.zeros(count, dtype=np.bool_)

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
        _append(queue_head, queue_tail, next_queued, replica, request)
        queued[replica] += 1

    def dequeue(replica):
        queued[replica] -= 1
        return _take(queue_head, queue_tail, next_queued, replica)

    def drop(replica, request):
        """Shed a request the replica had admitted to its queue."""
        _shed(shed, ttft, finish, request)
        loads[replica] -= 1
        host_out[replica_host[replica]] -= 1

    def expire(replica, now):
        """Shed the queue's head while it can no longer have its first token within the budget: in the
        container its deadline passed, and its place in the queue is free for the next arrival."""
        engine = replica_engine[replica]
        row = replica_padding[replica]
        while queued[replica] > 0:
            head = queue_head[replica]
            if (
                not over_slots[head]
                or now + padded[row, head] * inv_prefill[engine] - arrival[head] <= wait_budget
            ):
                break
            drop(replica, dequeue(replica))

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
            longest = longest_offset[replica]
            while free > 0 and queued[replica] > 0:
                request = dequeue(replica)
                first = time + padded[row, request] * inv_prefill[engine]
                if wait_bounded and over_slots[request] and first - arrival[request] > wait_budget:
                    # Its first token would come past the budget: the container aborts it there and sheds
                    # it (container/serving/streaming_model.py); the prefill it would have wasted is not
                    # charged here.
                    drop(replica, request)
                    continue
                free -= 1
                time = first
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
        host, replica = _choose(request, least_outstanding, host_out, host_first, host_replicas, loads)
        served_by[request] = replica
        engine = replica_engine[replica]
        if wait_bounded and queued[replica] > 0:
            expire(replica, now)
        if bounded and loads[replica] >= cap[engine] + queued_limit:
            _shed(shed, ttft, finish, request)
            continue
        over_slots[request] = loads[replica] >= cap[engine]
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


@njit(cache=True)
def run_mixed(
    arrival,  # float64[request], sorted
    output,  # int64[request]: tokens, the first one from the prefill's last chunk
    prompt,  # int64[request]: tokens to prefill
    replica_host,  # int64[replica]
    replica_engine,  # int64[replica]
    host_first,  # int64[host]: its first replica (a host's replicas are consecutive)
    host_replicas,  # int64[host]
    inv_prefill,  # float64[engine]: seconds per prefilled token in a step
    cap,  # int64[engine]: max_num_seqs
    budget,  # int64[engine]: max_num_batched_tokens, the tokens one step schedules
    steps,  # float64[engine, batch]: a step's cost by its decoding sequences (0: a prefill-only step's)
    per_context,  # float64[engine]: what each token of the decoding sequences' contexts adds to a step
    share,  # float64[engine]: what a pass that also prefills pays of its decodes' step, past the fixed cost
    least_outstanding,  # bool: least outstanding requests, else round robin
    bounded,  # bool: the admission bound applies
    queued_limit,  # int64: requests a replica holds beyond its slots before it refuses
):
    """`run` for engines whose scheduler is "mixed" (simulate.Scheduler): one forward pass a step for the
    running decodes and the waiting prompts together, as vLLM's V1 scheduler does
    (vllm/v1/core/sched/scheduler.py, `Scheduler.schedule`: first the RUNNING requests in the order they
    were admitted, each a decode token or its prompt's next chunk, then WAITING requests in arrival order
    while the step's token budget, max_num_batched_tokens, lasts and fewer than max_num_seqs run; a prompt
    longer than what is left of the budget is prefilled in chunks over several steps). A step costs its
    decodes' step (with their attention over their contexts, prompt and tokens so far, at `per_context` a
    token), its prefill tokens at the prefill rate, or both as simulate.Engine says (`share`). Every
    sequence in a step gains its token at the step's end: a decode its next one, a prompt whose last chunk
    ran its first.
    Stepped one step at a time, as each step's cost depends on what joined it; the balancer, the replica
    choice and the admission bound are `run`'s."""
    count = len(arrival)
    replicas = len(replica_host)
    hosts = len(host_first)
    ttft = np.zeros(count)
    finish = np.zeros(count)
    served_by = np.zeros(count, dtype=np.int64)
    shed = np.zeros(count, dtype=np.bool_)
    next_queued = np.full(count, END, dtype=np.int64)
    to_prefill = prompt.copy()  # prompt tokens no step has run yet
    generated = np.zeros(count, dtype=np.int64)  # tokens out by the end of the replica's current step

    host_out = np.zeros(hosts, dtype=np.int64)
    loads = np.zeros(replicas, dtype=np.int64)  # outstanding requests per replica
    widest = 1
    for engine in range(len(cap)):
        widest = max(widest, cap[engine])
    # Each replica's running requests in the order they were admitted (vLLM's `running` list).
    run_list = np.zeros((replicas, widest), dtype=np.int64)
    running = np.zeros(replicas, dtype=np.int64)
    firsts = np.zeros(widest, dtype=np.int64)  # the prompts whose last chunk the step being laid out runs
    queue_head = np.full(replicas, END, dtype=np.int64)
    queue_tail = np.full(replicas, END, dtype=np.int64)
    busy = np.zeros(replicas, dtype=np.bool_)
    event_time = np.full(replicas, math.inf)

    events = [(0.0, 0)]
    events.pop()

    def step(replica, now):
        """The replica's step that ended at `now` (none when it was idle) retires the sequences it
        completed; the next step is laid out and its end becomes the replica's event."""
        engine = replica_engine[replica]
        size = running[replica]
        kept = 0
        for column in range(size):
            request = run_list[replica, column]
            if to_prefill[request] == 0 and generated[request] >= output[request]:
                finish[request] = now
            else:
                run_list[replica, kept] = request
                kept += 1
        done = size - kept
        size = kept
        host_out[replica_host[replica]] -= done
        loads[replica] -= done
        left = budget[engine]
        decodes = 0
        context = 0
        prefilled = 0
        first = 0
        for column in range(size):
            if left == 0:
                break
            request = run_list[replica, column]
            if to_prefill[request] > 0:  # a prompt whose earlier chunks ran
                chunk = min(to_prefill[request], left)
                to_prefill[request] -= chunk
                prefilled += chunk
                left -= chunk
                if to_prefill[request] == 0:
                    firsts[first] = request
                    first += 1
            else:
                decodes += 1
                left -= 1
                context += prompt[request] + generated[request]
                generated[request] += 1
        while left > 0 and size < cap[engine] and queue_head[replica] != END:
            request = _take(queue_head, queue_tail, next_queued, replica)
            run_list[replica, size] = request
            size += 1
            chunk = min(to_prefill[request], left)
            to_prefill[request] -= chunk
            prefilled += chunk
            left -= chunk
            if to_prefill[request] == 0:
                firsts[first] = request
                first += 1
        running[replica] = size
        if decodes == 0 and prefilled == 0:
            busy[replica] = False
            event_time[replica] = math.inf
            return
        decode = steps[engine, decodes] + context * per_context[engine]
        prefill = steps[engine, 0] + prefilled * inv_prefill[engine]
        if prefilled == 0:
            end = now + decode
        elif decodes == 0:
            end = now + prefill
        else:
            end = now + prefill + share[engine] * (decode - steps[engine, 0])
        for index in range(first):
            request = firsts[index]
            generated[request] = 1
            ttft[request] = end - arrival[request]
        event_time[replica] = end
        heapq.heappush(events, (end, replica))

    def advance(until):
        """Run every step that ends by `until`."""
        while len(events) > 0 and events[0][0] <= until:
            time, replica = heapq.heappop(events)
            if time == event_time[replica]:
                step(replica, time)

    for request in range(count):
        now = arrival[request]
        advance(now)
        host, replica = _choose(request, least_outstanding, host_out, host_first, host_replicas, loads)
        served_by[request] = replica
        if bounded and loads[replica] >= cap[replica_engine[replica]] + queued_limit:
            _shed(shed, ttft, finish, request)
            continue
        host_out[host] += 1
        loads[replica] += 1
        _append(queue_head, queue_tail, next_queued, replica, request)
        if not busy[replica]:
            # Every step up to now has run, so an idle engine starts one at once; a busy engine takes the
            # request into the step after the one running, as vLLM's scheduler runs between steps.
            busy[replica] = True
            step(replica, now)

    advance(math.inf)  # the fleet drains after the last arrival
    return ttft, finish, served_by, shed
