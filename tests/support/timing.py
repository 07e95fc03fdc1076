"""Wall-clock limits for tests: the product's own bound plus a margin that survives a loaded machine.

A test that must see something happen within a time names the bound the product promises (an idle
timeout, a deadline, a stop grace, keepalive time + timeout) and adds `MARGIN`, never a bare number
tuned on an idle machine. Where the test can observe the order of events instead (the abort arrived
before the request could have finished by itself), it does that and needs no limit at all.
"""

from __future__ import annotations

#: What a busy machine may add to any bound before the test sees its effect: the test suites run on
#: two cores shared by several sessions, where a process or the event loop can wait seconds for a CPU.
#: Each limit built on it stays below what the broken behaviour would take (the next fallback bound,
#: such as keepalive's, or forever), so the test still fails when the bound is not honoured.
MARGIN = 5.0

#: How long to wait for something that happens promptly when nothing is broken, before failing
#: instead of hanging: it bounds a wait, it measures nothing.
PATIENCE = 30.0
