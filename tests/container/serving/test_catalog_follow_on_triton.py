"""The live catalog on the real server: moto's S3 in server mode stands in for the bucket, the host follows
its current.json every second, and a new build's price shows in the next answer while streams run on.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto.moto_server.threaded_moto_server import ThreadedMotoServer

from assistant.retrieve import MANIFEST_NAME
from entrypoint.s3_fetch import POINTER_NAME, S3Location, upload_build
from local.client import StreamingClient
from local.triton_server import ServerError, TritonServer
from tests.container.conftest import SERVER_START_TIMEOUT_S, TEST_ENVIRONMENT, emf_lines, wait_for
from tests.container.serving.test_catalog_follow import index_with_price

pytestmark = pytest.mark.vllm_version

BUCKET = "artifacts"
LOCATION = S3Location(BUCKET, "catalog-index")
QUESTION = "zephyr hiking boots"
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def bucket() -> Iterator[tuple[str, object]]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)  # binds a port of its own
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    client.create_bucket(Bucket=BUCKET)
    try:
        yield endpoint, client
    finally:
        server.stop()


@pytest.fixture(scope="module")
def following(demo_assets, bucket, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    endpoint, s3 = bucket
    work = tmp_path_factory.mktemp("follow")
    first = index_with_price(work / "v1", 100.0)
    upload_build(s3, first, LOCATION, manifest=MANIFEST_NAME)
    # What the entrypoint leaves on a host: the pointer's build, downloaded.
    served = work / "index"
    shutil.copytree(first, served)
    server = TritonServer(
        model_dir=demo_assets.model_dir,
        index_dir=served,
        work_dir=work / "triton",
        pick_ports=True,
        models=("assistant",),
        extra_environment={
            **TEST_ENVIRONMENT,
            **CREDENTIALS,
            "AWS_ENDPOINT_URL_S3": endpoint,
            "CATALOG_INDEX_S3_URI": str(LOCATION),
            "CATALOG_FOLLOW_SECONDS": "1",
            "CATALOG_FOLLOW_DIR": str(work / "builds"),
        },
    )
    (work / "triton").mkdir()
    try:
        server.start(timeout_s=SERVER_START_TIMEOUT_S)
    except ServerError as err:
        pytest.fail(f"the test server did not start: {err}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


def follow_lines(server: TritonServer) -> list[dict]:
    return [line for line in emf_lines(server) if line.get("Kind") == "index-follow"]


def boots_price(server: TritonServer, **sampling) -> float:
    with StreamingClient(server.grpc_url) as client:
        result = client.ask(QUESTION, sampling={"max_tokens": 4, **sampling})
    assert result.error is None, result.error
    return next(card["price"] for card in result.products if "Zephyr" in card["title"])


def publish(s3, tmp: Path, price: float) -> str:
    location = upload_build(s3, index_with_price(tmp, price), LOCATION, manifest=MANIFEST_NAME)
    return location.prefix.rsplit("/", 1)[-1]


def test_a_new_price_shows_in_the_next_answer_and_no_stream_fails_during_the_swap(
    following: TritonServer, bucket, tmp_path: Path
) -> None:
    _, s3 = bucket
    assert wait_for(lambda: follow_lines(following), timeout_s=30), "the host reports its index version"
    first_version = follow_lines(following)[-1]["IndexVersion"]
    assert boots_price(following) == 100.0

    # A long stream starts on the old build; streams keep coming from 3 clients while the swap happens.
    long_result = {}
    failures: list[str] = []
    answers: list[tuple[float, float]] = []  # (when the request was sent, the price it answered)
    stop = threading.Event()

    def long_stream() -> None:
        with StreamingClient(following.grpc_url) as client:
            long_result["value"] = client.ask(QUESTION, sampling={"max_tokens": 64, "min_tokens": 64})

    def keep_asking() -> None:
        with StreamingClient(following.grpc_url) as client:
            while not stop.is_set():
                sent_at = time.monotonic()
                result = client.ask(QUESTION, sampling={"max_tokens": 8})
                if result.error is not None:
                    failures.append(result.error)
                else:
                    price = next(card["price"] for card in result.products if "Zephyr" in card["title"])
                    answers.append((sent_at, price))

    threads = [threading.Thread(target=long_stream)]
    threads += [threading.Thread(target=keep_asking) for _ in range(3)]
    for thread in threads:
        thread.start()
    try:
        assert wait_for(lambda: len(answers) >= 3, timeout_s=120), "streams run before the new build"
        build = publish(s3, tmp_path / "v2", 55.0)
        swapped = wait_for(
            lambda: [line for line in follow_lines(following) if line["Build"] == build and line["Swapped"]],
            timeout_s=120,
        )
        assert swapped, "the host swapped the new build in"
        # The swap happens before its line is written, so a request sent once the line is seen is the next
        # request. One sent before may still answer the old price, later, on a busy machine.
        swap_seen_at = time.monotonic()

        def sent_after_swap() -> list[float]:
            return [price for sent_at, price in answers if sent_at > swap_seen_at]

        assert wait_for(lambda: len(sent_after_swap()) >= 3, timeout_s=120), "streams go on after it"
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=180)
    assert failures == [], "no request failed during the swap"
    # The long stream began on the old build and finished whole; the next answer has the new price.
    assert long_result["value"].error is None and len(long_result["value"].chunks) >= 1
    assert 100.0 in [price for sent_at, price in answers if sent_at < swap_seen_at]
    assert sent_after_swap() and set(sent_after_swap()) == {55.0}, sent_after_swap()
    assert boots_price(following) == 55.0
    assert swapped[-1]["IndexVersion"] > first_version and swapped[-1]["IndexFollowFailed"] == 0


def test_a_corrupt_pointer_keeps_the_served_build_and_is_counted(following: TritonServer, bucket) -> None:
    _, s3 = bucket
    served = boots_price(following)
    before = len(follow_lines(following))
    s3.put_object(Bucket=BUCKET, Key=f"{LOCATION.prefix}/{POINTER_NAME}", Body=b"{not json")
    failed = wait_for(
        lambda: [line for line in follow_lines(following)[before:] if line["IndexFollowFailed"] == 1],
        timeout_s=60,
    )
    assert failed and "not a build pointer" in failed[-1]["Error"]
    assert boots_price(following) == served
    # The gauge goes on naming the build still served.
    assert failed[-1]["IndexVersion"] == follow_lines(following)[before - 1]["IndexVersion"]
