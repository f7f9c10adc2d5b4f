import grpc

from mesh_dagster.engine.session import spark_error_message


class _Unreachable(grpc.RpcError):
    def details(self) -> str:
        return "failed to connect to all addresses"

    def __str__(self) -> str:
        return "<_MultiThreadedRendezvous of RPC that terminated with: ...>"


def test_grpc_failure_reads_as_one_line():
    assert spark_error_message(_Unreachable()) == "Spark Connect server unreachable: failed to connect to all addresses"
