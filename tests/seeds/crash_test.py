import pytest
from interlock import Interlock, SimulatedCrash
# 6. Add a test per effect that crashes after the send and asserts exactly one effect.
# For a decorated function: fn.gate.submit(fn.proposal(*args), crash_after_effect=True) raises SimulatedCrash;
with pytest.raises(SimulatedCrash):
    fn.gate.submit(fn.proposal(*args), crash_after_effect=True)
# then simulate the restart: create a new Interlock on the same directory,
gate = Interlock(directory)
# decorate the same function on it again,
fn = decorate(gate)
# call its recover() and check the status (AMBIGUOUS for tier 3),
[outcome] = gate.recover()
assert outcome.status == expected
# and assert the target recorded one effect.
assert service.refund_count() == 1
