# Ranged GETs: bytes=a-b, open-ended, suffix, unsatisfiable (416 InvalidRange), across stripes.
# Ported from ceph/s3-tests s3tests_boto3/functional/test_s3.py (same test names; cases marked
# `lowtail` are this project's own). Assertions are upstream's unless a comment says why not.

import os
import random
import string

import pytest
from botocore.exceptions import ClientError

from s3support import (
    _get_body,
    _get_status_and_error_code,
    assert_raises,
    get_client,
    get_new_bucket,
)


def test_ranged_request_response_code():
    content = "testcontent"
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="testobj", Body=content)
    response = client.get_object(Bucket=bucket_name, Key="testobj", Range="bytes=4-7")
    assert _get_body(response) == content[4:8]
    assert response["ResponseMetadata"]["HTTPHeaders"]["content-range"] == "bytes 4-7/11"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 206


def _generate_random_string(size):
    return "".join(random.choice(string.ascii_letters + string.digits) for _ in range(size))


def test_ranged_big_request_response_code():
    content = _generate_random_string(8 * 1024 * 1024)
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="testobj", Body=content)
    response = client.get_object(Bucket=bucket_name, Key="testobj", Range="bytes=3145728-5242880")
    assert _get_body(response) == content[3145728:5242881]
    assert response["ResponseMetadata"]["HTTPHeaders"]["content-range"] == "bytes 3145728-5242880/8388608"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 206


def test_ranged_request_skip_leading_bytes_response_code():
    content = "testcontent"
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="testobj", Body=content)
    response = client.get_object(Bucket=bucket_name, Key="testobj", Range="bytes=4-")
    assert _get_body(response) == content[4:]
    assert response["ResponseMetadata"]["HTTPHeaders"]["content-range"] == "bytes 4-10/11"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 206


def test_ranged_request_return_trailing_bytes_response_code():
    content = "testcontent"
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="testobj", Body=content)
    response = client.get_object(Bucket=bucket_name, Key="testobj", Range="bytes=-7")
    assert _get_body(response) == content[-7:]
    assert response["ResponseMetadata"]["HTTPHeaders"]["content-range"] == "bytes 4-10/11"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 206


def test_ranged_request_invalid_range():
    content = "testcontent"
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="testobj", Body=content)
    e = assert_raises(ClientError, client.get_object, Bucket=bucket_name, Key="testobj", Range="bytes=40-50")
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 416
    assert error_code == "InvalidRange"


def test_ranged_request_empty_object():
    content = ""
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="testobj", Body=content)
    e = assert_raises(ClientError, client.get_object, Bucket=bucket_name, Key="testobj", Range="bytes=40-50")
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 416
    assert error_code == "InvalidRange"


@pytest.mark.lowtail
def test_ranged_request_end_past_object():
    # RFC 9110: a last byte beyond the object is clipped to it.
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="testobj", Body="testcontent")
    response = client.get_object(Bucket=bucket_name, Key="testobj", Range="bytes=4-100")
    assert _get_body(response) == "testcontent"[4:]
    assert response["ResponseMetadata"]["HTTPHeaders"]["content-range"] == "bytes 4-10/11"
    assert response["ContentLength"] == 7


@pytest.mark.lowtail
def test_ranged_request_suffix_longer_than_object():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="testobj", Body="testcontent")
    response = client.get_object(Bucket=bucket_name, Key="testobj", Range="bytes=-100")
    assert _get_body(response) == "testcontent"
    assert response["ResponseMetadata"]["HTTPHeaders"]["content-range"] == "bytes 0-10/11"
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 206


@pytest.mark.lowtail
def test_ranged_request_first_byte_at_size():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="testobj", Body="testcontent")
    e = assert_raises(ClientError, client.get_object, Bucket=bucket_name, Key="testobj", Range="bytes=11-")
    assert _get_status_and_error_code(e.response) == (416, "InvalidRange")


@pytest.mark.lowtail
def test_ranged_head_request():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="testobj", Body="testcontent")
    response = client.head_object(Bucket=bucket_name, Key="testobj", Range="bytes=4-7")
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 206
    assert response["ContentLength"] == 4
    assert response["ResponseMetadata"]["HTTPHeaders"]["content-range"] == "bytes 4-7/11"


@pytest.mark.lowtail
def test_ranged_requests_across_stripes():
    # Ranges that start and end inside, at and across the erasure-coded segments of a 7 MiB object.
    bucket_name = get_new_bucket()
    client = get_client()
    body = os.urandom(7 * 1024 * 1024 + 3)
    client.put_object(Bucket=bucket_name, Key="testobj", Body=body)
    rng = random.Random(7)
    size = len(body)
    ranges = [(0, 0), (size - 1, size - 1), (1 << 20, (2 << 20) - 1), ((1 << 20) - 1, (1 << 20))]
    ranges += [tuple(sorted((rng.randrange(size), rng.randrange(size)))) for _ in range(8)]
    for first, last in ranges:
        response = client.get_object(Bucket=bucket_name, Key="testobj", Range=f"bytes={first}-{last}")
        assert response["Body"].read() == body[first : last + 1], (first, last)
        assert response["ResponseMetadata"]["HTTPHeaders"]["content-range"] == f"bytes {first}-{last}/{size}"


@pytest.mark.lowtail
@pytest.mark.parametrize("header", ["bytes=abc", "bytes=5-2", "bytes=0-1,3-4", "items=0-1", "bytes="])
def test_ranged_request_unusable_range_is_ignored(header):
    # As S3 does (and RFC 9110 allows): a Range header that is not one byte range is ignored, and
    # the whole object comes back with 200.
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="obj", Body="0123456789")
    response = client.get_object(Bucket=bucket_name, Key="obj", Range=header)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert _get_body(response) == "0123456789"
    assert "ContentRange" not in response
    head = client.head_object(Bucket=bucket_name, Key="obj", Range=header)
    assert (head["ResponseMetadata"]["HTTPStatusCode"], head["ContentLength"]) == (200, 10)


@pytest.mark.lowtail
def test_ranged_request_unusable_range_still_needs_a_signature():
    # The detour that ignores such a Range runs after the signature check: an unsigned request is
    # still refused, and a presigned URL still works.
    import urllib3

    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="obj", Body="0123456789")
    http = urllib3.PoolManager(retries=False)
    url = client.generate_presigned_url("get_object", Params={"Bucket": bucket_name, "Key": "obj"}, ExpiresIn=60)
    unsigned = http.request("GET", url.split("?")[0], headers={"Range": "bytes=abc"})
    assert unsigned.status == 403
    presigned = http.request("GET", url, headers={"Range": "bytes=abc"})
    assert (presigned.status, presigned.data) == (200, b"0123456789")
