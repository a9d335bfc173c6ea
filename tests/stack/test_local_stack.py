"""The embedded stack: provisioned from the shared definitions, loopback only, idempotent."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from pathlib import Path

import boto3
import psutil
import pytest
from botocore.exceptions import ClientError

from contracts.lake_tables import TABLES
from contracts.settings import Settings
from contracts.wallets_table import PARTITION_KEY, STREAM_VIEW_TYPE, TTL_ATTRIBUTE
from walletlake.local import EmbeddedStack, StackError, _stack, patched_environ, provision
from walletlake.local._seaweedfs import SeaweedPorts
from walletlake.local._servers import ServerExitedError, ensure_port_free

pytestmark = pytest.mark.stack


def test_stack_provisions_table_stream_ttl_bucket_and_glue(stack: EmbeddedStack) -> None:
    settings = stack.settings
    dynamodb = boto3.client("dynamodb")
    table = dynamodb.describe_table(TableName=settings.table)["Table"]
    assert table["KeySchema"] == [{"AttributeName": PARTITION_KEY, "KeyType": "HASH"}]
    assert table["StreamSpecification"] == {"StreamEnabled": True, "StreamViewType": STREAM_VIEW_TYPE}
    ttl = dynamodb.describe_time_to_live(TableName=settings.table)["TimeToLiveDescription"]
    assert ttl["AttributeName"] == TTL_ATTRIBUTE
    assert ttl["TimeToLiveStatus"] == "ENABLED"
    assert boto3.client("s3").head_bucket(Bucket=settings.bucket)["ResponseMetadata"]["HTTPStatusCode"] == 200
    glue_tables = boto3.client("glue").get_tables(DatabaseName=settings.glue_database)["TableList"]
    assert sorted(t["Name"] for t in glue_tables) == sorted(TABLES)
    ledger = next(t for t in glue_tables if t["Name"] == "ledger")
    assert ledger["Parameters"]["projection.dt.type"] == "date"
    assert [c["Name"] for c in ledger["StorageDescriptor"]["Columns"]] == TABLES["ledger"].names


def test_provisioning_twice_changes_nothing(stack: EmbeddedStack) -> None:
    lines = provision(stack.settings)
    assert "dynamodb table wallets: exists" in lines
    assert "s3 bucket walletlake-lake: exists" in lines
    assert f"glue database {stack.settings.glue_database}: exists" in lines


def test_seaweedfs_logs_into_the_stacks_data_folder_not_the_temp_folder(stack: EmbeddedStack) -> None:
    # GIVEN the running SeaweedFS process
    weed = psutil.Process(stack.server("SeaweedFS").process.pid)
    # THEN glog writes its files under the stack's logs folder, and none of them is in the temp folder
    logs = stack.data_dir / "logs"
    assert f"-logdir={logs}" in weed.cmdline()
    own = {path for path in (file.path for file in weed.open_files()) if "/weed." in path}
    assert own, "SeaweedFS has no glog file open"
    assert all(path.startswith(str(logs)) for path in own), own
    assert any(path.name.startswith("weed.") for path in logs.iterdir())


def test_servers_listen_on_loopback_only(stack: EmbeddedStack) -> None:
    assert stack.endpoints is not None
    endpoints = (stack.endpoints.dynamodb, stack.endpoints.s3, stack.endpoints.aws)
    ports = {int(url.rsplit(":", 1)[1]) for url in endpoints}
    pids = set()
    for name in ("DynamoDB Local", "SeaweedFS", "moto server"):
        root = psutil.Process(stack.server(name).process.pid)
        pids |= {root.pid, *(child.pid for child in root.children(recursive=True))}
    listening = {
        (conn.laddr.ip, conn.laddr.port)
        for conn in psutil.net_connections(kind="tcp")
        if conn.status == psutil.CONN_LISTEN and conn.pid in pids
    }
    # THEN every endpoint listens, and every listener of every server (SeaweedFS's master, volume,
    # filer and gRPC ports too) is on the loopback address only
    assert ports <= {port for _, port in listening}
    assert len(listening) >= 3 + 9  # SeaweedFS: S3 and the nine internal listeners
    assert {ip.removeprefix("::ffff:") for ip, _ in listening} == {"127.0.0.1"}


def test_s3_checks_signatures_and_conditional_writes(stack: EmbeddedStack) -> None:
    # GIVEN SeaweedFS as the stack's S3, and a client whose secret is wrong
    assert stack.endpoints is not None
    bucket = stack.settings.bucket
    wrong = boto3.client("s3", aws_secret_access_key="not-the-secret", aws_access_key_id="walletlakelocal")
    # THEN a wrongly signed request is refused as AWS refuses it
    with pytest.raises(ClientError) as refused:
        wrong.list_objects_v2(Bucket=bucket)
    assert refused.value.response["Error"]["Code"] == "SignatureDoesNotMatch"
    # AND a write that must not replace an object is refused when one exists (If-None-Match: *)
    s3 = boto3.client("s3")
    s3.put_object(Bucket=bucket, Key="conditional/once.txt", Body=b"first")
    with pytest.raises(ClientError) as exists:
        s3.put_object(Bucket=bucket, Key="conditional/once.txt", Body=b"second", IfNoneMatch="*")
    assert exists.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket=bucket, Key="conditional/once.txt")["Body"].read() == b"first"
    s3.delete_object(Bucket=bucket, Key="conditional/once.txt")


def test_s3_multipart_complete_honours_if_none_match(stack: EmbeddedStack) -> None:
    # GIVEN an object already at a key on the stack's S3
    bucket = stack.settings.bucket
    s3 = boto3.client("s3")
    s3.put_object(Bucket=bucket, Key="conditional/multipart.txt", Body=b"first")
    upload = s3.create_multipart_upload(Bucket=bucket, Key="conditional/multipart.txt")
    part = s3.upload_part(
        Bucket=bucket,
        Key="conditional/multipart.txt",
        UploadId=upload["UploadId"],
        PartNumber=1,
        Body=b"second",
    )
    # WHEN a multipart upload to that key completes with If-None-Match: *
    with pytest.raises(ClientError) as exists:
        s3.complete_multipart_upload(
            Bucket=bucket,
            Key="conditional/multipart.txt",
            UploadId=upload["UploadId"],
            MultipartUpload={"Parts": [{"ETag": part["ETag"], "PartNumber": 1}]},
            IfNoneMatch="*",
        )
    # THEN it is refused as AWS refuses it, and the object is the first one
    assert exists.value.response["Error"]["Code"] == "PreconditionFailed"
    assert s3.get_object(Bucket=bucket, Key="conditional/multipart.txt")["Body"].read() == b"first"
    s3.abort_multipart_upload(Bucket=bucket, Key="conditional/multipart.txt", UploadId=upload["UploadId"])
    s3.delete_object(Bucket=bucket, Key="conditional/multipart.txt")


def test_busy_port_is_a_one_line_error_naming_the_flag(stack: EmbeddedStack) -> None:
    assert stack.endpoints is not None
    port = int(stack.endpoints.dynamodb.rsplit(":", 1)[1])
    with pytest.raises(StackError, match=r"^port \d+ on 127.0.0.1 is busy: .* --dynamodb-port$"):
        ensure_port_free("127.0.0.1", port, "--dynamodb-port")


def test_settings_from_env_follow_the_stack(stack: EmbeddedStack) -> None:
    assert Settings.from_env().query_engine == "duckdb"


@pytest.fixture
def master_port_taken_once(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """The first SeaweedFS ports chosen get their master port taken before ``weed`` binds it.

    As another process's connection can take a port between :func:`free_port` and the bind.
    Yields the ports taken; the sockets are closed after the test.
    """
    choose = SeaweedPorts.choose.__func__  # type: ignore[attr-defined]
    held: list[socket.socket] = []
    taken: list[int] = []

    def taking(
        cls: type[SeaweedPorts], host: str, s3: int | None, _base: int | None, iceberg: int | None = None
    ) -> SeaweedPorts:
        ports = choose(cls, host, s3, None, iceberg)
        if not held:
            sock = socket.socket()
            sock.bind((host, ports.internal["master.port"]))
            sock.listen()
            held.append(sock)
            taken.append(ports.internal["master.port"])
        return ports

    monkeypatch.setattr(_stack.SeaweedPorts, "choose", classmethod(taking))
    yield taken
    for sock in held:
        sock.close()


def test_a_port_taken_before_seaweedfs_binds_it_is_chosen_again(
    tmp_path: Path, master_port_taken_once: list[int], caplog: pytest.LogCaptureFixture
) -> None:
    # GIVEN ports chosen by the stack, one of them taken under it
    # WHEN the stack starts
    with caplog.at_level(logging.WARNING), EmbeddedStack(tmp_path / "data") as stack:
        # THEN it started SeaweedFS again on other ports, said so, and answers
        argv = stack.server("SeaweedFS").argv
        assert f"-master.port={master_port_taken_once[0]}" not in argv
        assert any(arg.startswith("-master.port=") for arg in argv)
        with patched_environ(stack.environment()):
            s3 = boto3.client("s3", region_name=stack.settings.region)
            assert s3.head_bucket(Bucket=stack.settings.bucket)["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert [r.getMessage() for r in caplog.records if "starting the stack again" in r.getMessage()] == [
        "SeaweedFS exited with code 1 while starting; see its log; starting the stack again "
        "on other free ports (attempt 2 of 3)"
    ]


def test_a_server_on_ports_the_caller_gave_is_not_moved(
    tmp_path: Path, master_port_taken_once: list[int]
) -> None:
    # GIVEN SeaweedFS's ports given by the caller (--seaweedfs-port-base), one taken under it
    # WHEN the stack starts THEN the death is reported at once, not hidden by other ports
    with pytest.raises(ServerExitedError, match=r"^SeaweedFS exited with code \d+ while starting"):
        EmbeddedStack(tmp_path / "data", seaweedfs_port_base=1).start()
    assert master_port_taken_once
