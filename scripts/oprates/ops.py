"""The steps of a URL's path, as the timing logs name them (`op`).

The names and the work/wait split mirror `Op` in shared/src/timing.rs. They
live in one module so that every command agrees on what a step is: the order
tables are printed in, which steps are waits (a wait grows *behind* a
bottleneck, it is not one), which steps log batches, and which resource each
step's time is charged to in the bottleneck report.
"""

from __future__ import annotations

# Outcomes that mean "the operation did what it should". `waited` is the
# politeness pause, `absent` a robots.txt that is not there (4xx: no rules):
# both are normal, so they must not inflate the error share.
SUCCESS_OUTCOMES = frozenset({"ok", "waited", "absent"})

# Pipeline order (Op::ALL), so tables read like a page's life; unknown ops
# sort after. The old logs' ops keep their old relative order.
OP_ORDER = (
    "queue_wait",
    "dispatch",
    "start_wait",
    "robots_lookup",
    "robots_fetch",
    "domain_wait",
    "politeness_wait",
    "server_wait",
    "slot_wait",
    "fetch",
    "parse",
    "store_wait",
    "store",
    "result_wait",
    "report",
    "frontier_insert",
    "domain_flush",
    "robots_flush",
    "frontier_read",
    "seen_scan",
    "dns_lookup",
)

# Steps that wait rather than work (Op::is_wait). Trend leaves them out of
# its verdict: a queue grows whenever whatever is behind it is slow, so
# naming the queue would name the symptom, not the cause.
WAIT_OPS = frozenset({
    "queue_wait",
    "start_wait",
    "domain_wait",
    "politeness_wait",
    "server_wait",
    "slot_wait",
    "store_wait",
    "result_wait",
})

# Waits that are slow on purpose: a growing politeness wait means the crawl
# obeys a site's Crawl-delay (or a shared server's gap), not that something
# is wrong.
DELIBERATE_WAITS = frozenset({"politeness_wait", "server_wait"})

# Operations that log one line per batch with `"n": items` (absent = 1).
BATCH_OPS = frozenset({"store", "frontier_insert", "dispatch", "report", "domain_flush", "robots_flush",
                       "frontier_read", "seen_scan"})

# The bottleneck report's lease-time breakdown: the time URLs spend in each
# step between their lease and their result, charged to the resource that
# step waits for or uses. Steps outside this map (queue_wait is before the
# lease; robots and the dispatcher's own batch work are not per URL) are
# not charged.
LEASE_GROUP = {
    "start_wait": "dispatcher",   # the relay: leased until the child has it
    "result_wait": "dispatcher",  # a result waiting for the dispatcher to read it
    "politeness_wait": "politeness",
    "domain_wait": "politeness",  # one of the domain's tasks or connections
    "server_wait": "politeness",  # the domain's server, shared with its other names
    "slot_wait": "capacity",      # one of the child's fetch slots
    "fetch": "capacity",
    "parse": "cpu",
    "store_wait": "store",
    "store": "store",             # counted dur × n: every page waits for its whole batch
}

# Display order of the groups (also the resource words they can lead to).
GROUPS = ("store", "capacity", "politeness", "dispatcher", "cpu")


def op_rank(op: str) -> tuple:
    """Sort key putting ops in pipeline order, unknown ones after, by name."""
    return (OP_ORDER.index(op) if op in OP_ORDER else len(OP_ORDER), op)
