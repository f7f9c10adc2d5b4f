"""Local Spark is reachable from this machine's loopback only (issue 8, §4).

Spark's defaults bind the driver's RPC endpoint and block manager to the host's external address,
where anyone on the network could submit work that runs as this user. The Connect server's
sockets are checked in test_connect_server.py, on the server that module already runs.
"""

from __future__ import annotations

from tests.listening_sockets import descendants, is_loopback, listening


def test_embedded_session_listens_on_loopback_only(spark):
    jvm = spark.sparkContext._gateway.proc.pid  # noqa: SLF001 - PySpark keeps the JVM's Popen here
    spark.range(10).repartition(2).groupBy().count().collect()  # driver and block manager in use
    sockets = listening(descendants(jvm))
    assert sockets, "the JVM listens on nothing: the check would prove nothing"
    exposed = [s for s in sockets if not is_loopback(s[1])]
    assert exposed == [], f"listening beyond loopback: {exposed}"


def test_embedded_session_authenticates_its_connections(spark):
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.authenticate") == "true"
    assert conf.get("spark.ui.enabled") == "false"
