"""Where Krabka's answers differ from Apache Kafka's in the Java client
scenarios (java/Compat.java), and why.

Keys are transcript keys (``scenario.key``), ``fnmatch`` patterns allowed.
docs/COMPATIBILITY.md explains each entry; test_differential.py fails on a
difference not listed here and (in the long run) on an entry that no longer
differs.
"""

KNOWN = {
}
