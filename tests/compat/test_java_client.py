"""The Java client (kafka-clients, newest 4.x and a 3.x) against Krabka.

Java/Compat.java runs every scenario against the broker and checks what it
can on its own (records read back byte for byte, offsets, committed
offsets, read_committed); a scenario passes here when none of its checks
failed. The same program against Apache Kafka must pass too: that proves
the checks themselves describe Kafka's behaviour, not Krabka's.
"""

import pytest

from conftest import CLIENT_VERSIONS, version_param

SCENARIOS = ["produce", "errors", "configs", "admin", "classic_group", "consumer_group",
             "regex", "transactions", "eos", "features"]


def check_scenario(t, scenario, who):
    failed = t.failure(scenario)
    assert not failed, "%s: %s\n--- Compat.java output ---\n%s" % (who, "\n".join(failed), t.stderr[-8000:])
    assert t.scenario(scenario), "%s: scenario %s recorded nothing" % (who, scenario)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("version", [version_param(v) for v in CLIENT_VERSIONS])
def test_java_client_against_krabka(transcript, version, scenario):
    check_scenario(transcript("krabka", version), scenario, "krabka, kafka-clients " + version)


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("version", [version_param(v) for v in CLIENT_VERSIONS])
def test_java_client_against_kafka(transcript, version, scenario):
    check_scenario(transcript("kafka", version), scenario, "Apache Kafka, kafka-clients " + version)
