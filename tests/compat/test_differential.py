"""The same Java client scenarios against Apache Kafka and against Krabka,
their answers compared line by line (error codes, offsets, configs and
their sources, finalized features), and ApiVersions side by side.

Every difference must be listed in known_differences.py (and, with its
reason, in docs/COMPATIBILITY.md); anything else fails. In the long run a
listed difference that no longer shows fails too, so the list stays true.
"""

import fnmatch
import os
import re

import pytest

import api_versions
import known_differences
from conftest import CLIENT_VERSIONS, ROOT, is_full, version_param
from test_java_client import SCENARIOS

DOC = os.path.join(ROOT, "docs", "COMPATIBILITY.md")


def explained(key):
    return any(fnmatch.fnmatchcase(key, pattern) for pattern in known_differences.KNOWN)


def differences(kafka, krabka, scenario):
    a, b = kafka.scenario(scenario), krabka.scenario(scenario)
    return {k: (a.get(k, "<absent>"), b.get(k, "<absent>"))
            for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}


@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("version", [version_param(v) for v in CLIENT_VERSIONS])
def test_same_answers_as_kafka(transcript, version, scenario):
    kafka, krabka = transcript("kafka", version), transcript("krabka", version)
    assert not kafka.failure(scenario), "the scenario fails against Kafka itself: %s" % kafka.failure(scenario)
    diffs = differences(kafka, krabka, scenario)
    unexplained = {k: v for k, v in diffs.items() if not explained(k)}
    assert not unexplained, "differences from Apache Kafka not listed in known_differences.py:\n" + "\n".join(
        "  %s\n    kafka:  %s\n    krabka: %s" % (k, a, b) for k, (a, b) in unexplained.items())


@pytest.mark.full
def test_known_differences_still_differ(transcript):
    """A listed difference that no longer shows is stale: drop it from the list and the doc."""
    seen = set()
    for version in CLIENT_VERSIONS:
        kafka, krabka = transcript("kafka", version), transcript("krabka", version)
        for scenario in SCENARIOS:
            seen.update(differences(kafka, krabka, scenario))
    stale = [p for p in known_differences.KNOWN if not any(fnmatch.fnmatchcase(k, p) for k in seen)]
    assert not stale, "listed differences no longer seen (fixed? remove them): %s" % stale


def test_known_differences_documented():
    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    missing = [p for p in known_differences.KNOWN if "`%s`" % p not in doc]
    assert not missing, "known differences missing from docs/COMPATIBILITY.md: %s" % missing


def test_api_versions_within_kafka(kafka, krabka):
    """Krabka advertises no API Kafka lacks and no version newer than Kafka's."""
    ref = api_versions.fetch(kafka.bootstrap)
    ours = api_versions.fetch(krabka.bootstrap)
    assert ours, "Krabka advertised no API"
    unknown = sorted(set(ours) - set(ref))
    assert not unknown, "Krabka advertises APIs Kafka does not: %s" % unknown
    newer = {k: (ours[k], ref[k]) for k in ours if ours[k][1] > ref[k][1]}
    assert not newer, "Krabka advertises versions newer than Kafka's: %s" % newer


@pytest.mark.full
def test_api_versions_table_current(kafka, krabka):
    """docs/COMPATIBILITY.md's ApiVersions table is what the two brokers answer now
    (regenerate it with `tests/compat/run --api-table`)."""
    table = api_versions.markdown_table(api_versions.fetch(kafka.bootstrap), api_versions.fetch(krabka.bootstrap))
    with open(DOC, encoding="utf-8") as f:
        doc = f.read()
    m = re.search(r"<!-- api-versions:begin -->\n(.*?)<!-- api-versions:end -->", doc, re.S)
    assert m, "docs/COMPATIBILITY.md has no api-versions block"
    assert m.group(1).strip() == table.strip(), "the ApiVersions table is stale; now:\n" + table
