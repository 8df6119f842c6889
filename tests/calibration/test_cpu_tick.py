"""fit_profiles with the CPU quota checked at scheduler ticks (``cpu_tick_s``, ``--cpu-tick``)."""

import pytest

from pubsim.calibration.validate import fit_profiles
from pubsim.models.params.broker import BrokerParams
from pubsim.models.params.mapping import from_mapping
from pubsim.sim.errors import ConfigError
from tests.calibration.test_connection_term import META
from tests.calibration.test_knee_anchor import campaign


def test_fit_profiles_carries_the_tick_and_says_so():
    runs = campaign()
    prof = fit_profiles(runs, META, n_boot=0, connection_form="per_message", speed_drift=False, cpu_tick_s=0.004)
    broker = prof["mosquitto"]["broker"]["mosquitto"]
    assert broker["cpu_tick_s"] == 0.004 and "4 ms scheduler ticks" in broker["provenance"]["note"]
    assert from_mapping(BrokerParams, broker, "broker").cpu_tick_s == 0.004
    plain = fit_profiles(runs, META, n_boot=0, connection_form="per_message", speed_drift=False)
    assert "cpu_tick_s" not in plain["mosquitto"]["broker"]["mosquitto"]
    with pytest.raises(ConfigError) as err:
        fit_profiles(runs, META, n_boot=0, cpu_tick_s=-0.004)
    assert err.value.field == "cpu_tick_s"
