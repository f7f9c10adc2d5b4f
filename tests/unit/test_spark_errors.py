import grpc

from mesh_dagster.engine.session import spark_error_message
from tests.fakes import JavaException


class _Unreachable(grpc.RpcError):
    def details(self) -> str:
        return "failed to connect to all addresses"

    def __str__(self) -> str:
        return "<_MultiThreadedRendezvous of RPC that terminated with: ...>"


def test_grpc_failure_reads_as_one_line():
    assert spark_error_message(_Unreachable()) == "Spark Connect server unreachable: failed to connect to all addresses"


def test_tokens_in_connect_urls_are_redacted():
    from mesh_dagster.engine.session import redact_secrets

    assert redact_secrets("Cannot connect to Spark Connect at sc://h:1/;user_id=me;token=s3cr3t;use_ssl=true") == \
        "Cannot connect to Spark Connect at sc://h:1/;user_id=me;token=***;use_ssl=true"
    assert redact_secrets("sc://h:1/;TOKEN = abc") == "sc://h:1/;TOKEN = ***"


def test_a_metastore_booted_elsewhere_reads_as_busy_without_the_query_context(tmp_path):
    from mesh_dagster.engine.session import MetastoreBusyError, to_engine_error

    database = tmp_path / "metastore_db"
    exc = Exception("[_LEGACY_ERROR_TEMP_3065] Unable to instantiate SessionHiveMetaStoreClient")
    exc._origin = JavaException("Unable to instantiate SessionHiveMetaStoreClient", JavaException(
        f"Failed to start database '{database}'", JavaException(
            f"Another instance of Derby may have already booted the database {database}.")))
    error = to_engine_error(exc, "Spark query failed", "SHOW DATABASES")
    assert isinstance(error, MetastoreBusyError)
    assert str(error).startswith(f"The project's metastore ({database}) is in use by another process: ")
    assert spark_error_message(exc) == str(error)
