# Conditional requests: GET and HEAD with If-Match, If-None-Match, If-Modified-Since,
# If-Unmodified-Since (→ 304 / 412), and conditional PUT. Ported from ceph/s3-tests
# s3tests_boto3/functional/test_s3.py (same test names; cases marked `lowtail` are this project's
# own). Assertions are upstream's unless a comment says why not.

import datetime
import time

import pytest
from botocore.exceptions import ClientError

from s3support import (
    _get_body,
    _get_status_and_error_code,
    assert_raises,
    get_client,
    get_new_bucket,
)


def test_get_object_ifmatch_good():
    bucket_name = get_new_bucket()
    client = get_client()
    response = client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    etag = response["ETag"]
    response = client.get_object(Bucket=bucket_name, Key="foo", IfMatch=etag)
    assert _get_body(response) == "bar"


def test_get_object_ifmatch_failed():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    e = assert_raises(ClientError, client.get_object, Bucket=bucket_name, Key="foo", IfMatch='"ABCORZ"')
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 412
    assert error_code == "PreconditionFailed"


def test_get_object_ifnonematch_good():
    bucket_name = get_new_bucket()
    client = get_client()
    response = client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    etag = response["ETag"]
    e = assert_raises(ClientError, client.get_object, Bucket=bucket_name, Key="foo", IfNoneMatch=etag)
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 304
    assert e.response["Error"]["Message"] == "Not Modified"


def test_get_object_ifnonematch_failed():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    response = client.get_object(Bucket=bucket_name, Key="foo", IfNoneMatch="ABCORZ")
    assert _get_body(response) == "bar"


def test_get_object_ifmodifiedsince_good():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    response = client.get_object(Bucket=bucket_name, Key="foo", IfModifiedSince="Sat, 29 Oct 1994 19:43:31 GMT")
    assert _get_body(response) == "bar"


def test_get_object_ifmodifiedsince_failed():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    response = client.get_object(Bucket=bucket_name, Key="foo")
    mtime = response["LastModified"]
    after = mtime + datetime.timedelta(seconds=1)
    after_str = after.strftime("%a, %d %b %Y %H:%M:%S GMT")
    time.sleep(1)
    e = assert_raises(ClientError, client.get_object, Bucket=bucket_name, Key="foo", IfModifiedSince=after_str)
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 304
    assert e.response["Error"]["Message"] == "Not Modified"


def test_get_object_ifunmodifiedsince_good():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    e = assert_raises(
        ClientError, client.get_object, Bucket=bucket_name, Key="foo", IfUnmodifiedSince="Sat, 29 Oct 1994 19:43:31 GMT"
    )
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 412
    assert error_code == "PreconditionFailed"


def test_get_object_ifunmodifiedsince_failed():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    response = client.get_object(Bucket=bucket_name, Key="foo", IfUnmodifiedSince="Sat, 29 Oct 2100 19:43:31 GMT")
    assert _get_body(response) == "bar"


@pytest.mark.lowtail
def test_head_object_conditionals():
    bucket_name = get_new_bucket()
    client = get_client()
    etag = client.put_object(Bucket=bucket_name, Key="foo", Body="bar")["ETag"]
    assert client.head_object(Bucket=bucket_name, Key="foo", IfMatch=etag)["ETag"] == etag
    e = assert_raises(ClientError, client.head_object, Bucket=bucket_name, Key="foo", IfMatch='"ABCORZ"')
    assert _get_status_and_error_code(e.response)[0] == 412
    e = assert_raises(ClientError, client.head_object, Bucket=bucket_name, Key="foo", IfNoneMatch=etag)
    assert _get_status_and_error_code(e.response)[0] == 304
    e = assert_raises(
        ClientError, client.head_object, Bucket=bucket_name, Key="foo", IfUnmodifiedSince="Sat, 29 Oct 1994 19:43:31 GMT"
    )
    assert _get_status_and_error_code(e.response)[0] == 412


@pytest.mark.lowtail
def test_get_object_conditional_precedence():
    # RFC 9110 §13.2.2 (and S3): a matching If-Match wins over a failing If-Unmodified-Since, and a
    # non-matching If-None-Match wins over an If-Modified-Since that would say 304.
    bucket_name = get_new_bucket()
    client = get_client()
    etag = client.put_object(Bucket=bucket_name, Key="foo", Body="bar")["ETag"]
    response = client.get_object(
        Bucket=bucket_name, Key="foo", IfMatch=etag, IfUnmodifiedSince="Sat, 29 Oct 1994 19:43:31 GMT"
    )
    assert _get_body(response) == "bar"
    response = client.get_object(
        Bucket=bucket_name, Key="foo", IfNoneMatch='"ABCORZ"', IfModifiedSince="Sat, 29 Oct 2100 19:43:31 GMT"
    )
    assert _get_body(response) == "bar"


def _add_header(client, headers):
    client.meta.events.register(
        "before-call.s3.PutObject", lambda **kwargs: kwargs["params"]["headers"].update(headers)
    )


def test_put_object_ifmatch_good():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    response = client.get_object(Bucket=bucket_name, Key="foo")
    assert _get_body(response) == "bar"
    etag = response["ETag"].replace('"', "")
    _add_header(client, {"If-Match": etag})
    client.put_object(Bucket=bucket_name, Key="foo", Body="zar")
    response = client.get_object(Bucket=bucket_name, Key="foo")
    assert _get_body(response) == "zar"


def test_put_object_ifmatch_failed():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    response = client.get_object(Bucket=bucket_name, Key="foo")
    assert _get_body(response) == "bar"
    _add_header(client, {"If-Match": '"ABCORZ"'})
    e = assert_raises(ClientError, client.put_object, Bucket=bucket_name, Key="foo", Body="zar")
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 412
    assert error_code == "PreconditionFailed"
    response = get_client().get_object(Bucket=bucket_name, Key="foo")
    assert _get_body(response) == "bar"


def test_put_object_ifmatch_overwrite_existed_good():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    _add_header(client, {"If-Match": "*"})
    client.put_object(Bucket=bucket_name, Key="foo", Body="zar")
    response = client.get_object(Bucket=bucket_name, Key="foo")
    assert _get_body(response) == "zar"


@pytest.mark.xfail(
    reason="lowtail answers as AWS does (404 NoSuchKey for If-Match on a missing key); "
    "ceph/s3-tests expects 412 and marks the case fails_on_aws",
    strict=True,
)
def test_put_object_ifmatch_nonexisted_failed():
    bucket_name = get_new_bucket()
    client = get_client()
    _add_header(client, {"If-Match": "*"})
    e = assert_raises(ClientError, client.put_object, Bucket=bucket_name, Key="foo", Body="bar")
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 412
    assert error_code == "PreconditionFailed"


@pytest.mark.lowtail
def test_put_object_ifmatch_nonexisted_aws():
    # What AWS (and lowtail) answer instead of upstream's 412; and nothing is written.
    bucket_name = get_new_bucket()
    client = get_client()
    _add_header(client, {"If-Match": "*"})
    e = assert_raises(ClientError, client.put_object, Bucket=bucket_name, Key="foo", Body="bar")
    assert _get_status_and_error_code(e.response) == (404, "NoSuchKey")
    e = assert_raises(ClientError, get_client().get_object, Bucket=bucket_name, Key="foo")
    assert _get_status_and_error_code(e.response) == (404, "NoSuchKey")


def test_put_object_ifnonmatch_good():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    _add_header(client, {"If-None-Match": "ABCORZ"})
    client.put_object(Bucket=bucket_name, Key="foo", Body="zar")
    response = client.get_object(Bucket=bucket_name, Key="foo")
    assert _get_body(response) == "zar"


def test_put_object_ifnonmatch_failed():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    response = client.get_object(Bucket=bucket_name, Key="foo")
    etag = response["ETag"].replace('"', "")
    _add_header(client, {"If-None-Match": etag})
    e = assert_raises(ClientError, client.put_object, Bucket=bucket_name, Key="foo", Body="zar")
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 412
    assert error_code == "PreconditionFailed"
    response = get_client().get_object(Bucket=bucket_name, Key="foo")
    assert _get_body(response) == "bar"


def test_put_object_ifnonmatch_nonexisted_good():
    bucket_name = get_new_bucket()
    client = get_client()
    _add_header(client, {"If-None-Match": "*"})
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    response = client.get_object(Bucket=bucket_name, Key="foo")
    assert _get_body(response) == "bar"


def test_put_object_ifnonmatch_overwrite_existed_failed():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    _add_header(client, {"If-None-Match": "*"})
    e = assert_raises(ClientError, client.put_object, Bucket=bucket_name, Key="foo", Body="zar")
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 412
    assert error_code == "PreconditionFailed"
    response = get_client().get_object(Bucket=bucket_name, Key="foo")
    assert _get_body(response) == "bar"


@pytest.mark.lowtail
def test_put_object_ifnonmatch_race_has_one_winner():
    # The lock-file pattern (Terraform state, Delta/Iceberg commits): of 16 writers racing an
    # `If-None-Match: *` PUT of one key, exactly one wins, decided in the metadata store's commit.
    # Before, the condition was checked before the write, and several could win.
    # Bodies of 1 MiB, sent at once, so that every writer is still writing when the first commits.
    import concurrent.futures
    import threading

    bucket_name = get_new_bucket()
    clients = [get_client() for _ in range(16)]
    start = threading.Barrier(16)

    def put(i):
        body = (f"writer-{i:02}" * (1 << 17))[: 1 << 20]
        start.wait()
        try:
            clients[i].put_object(Bucket=bucket_name, Key="lock", Body=body, IfNoneMatch="*")
            return 200, i
        except ClientError as e:
            return _get_status_and_error_code(e.response)[0], i

    with concurrent.futures.ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(put, range(16)))
    winners = [i for status, i in results if status == 200]
    assert len(winners) == 1, results
    assert sorted(status for status, _ in results) == [200] + [412] * 15, results
    body = _get_body(get_client().get_object(Bucket=bucket_name, Key="lock"))
    assert body.startswith(f"writer-{winners[0]:02}")


@pytest.mark.lowtail
def test_delete_object_conditions():
    bucket_name = get_new_bucket()
    client = get_client()
    etag = client.put_object(Bucket=bucket_name, Key="foo", Body="bar")["ETag"]
    for condition in ({"IfMatch": '"0123456789abcdef0123456789abcdef"'}, {"IfMatchSize": 4}):
        e = assert_raises(ClientError, client.delete_object, Bucket=bucket_name, Key="foo", **condition)
        assert _get_status_and_error_code(e.response) == (412, "PreconditionFailed")
    assert _get_body(client.get_object(Bucket=bucket_name, Key="foo")) == "bar"
    answer = client.delete_objects(
        Bucket=bucket_name, Delete={"Objects": [{"Key": "foo", "ETag": '"0123456789abcdef0123456789abcdef"'}]}
    )
    assert [error["Code"] for error in answer["Errors"]] == ["PreconditionFailed"]
    client.delete_object(Bucket=bucket_name, Key="foo", IfMatch=etag, IfMatchSize=3)
    e = assert_raises(ClientError, client.head_object, Bucket=bucket_name, Key="foo")
    assert _get_status_and_error_code(e.response)[0] == 404


@pytest.mark.lowtail
def test_complete_multipart_upload_conditions():
    bucket_name = get_new_bucket()
    client = get_client()
    etag = client.put_object(Bucket=bucket_name, Key="foo", Body="bar")["ETag"]
    upload_id = client.create_multipart_upload(Bucket=bucket_name, Key="foo")["UploadId"]
    part = client.upload_part(Bucket=bucket_name, Key="foo", UploadId=upload_id, PartNumber=1, Body=b"new")
    parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    complete = dict(Bucket=bucket_name, Key="foo", UploadId=upload_id, MultipartUpload=parts)
    for condition in ({"IfNoneMatch": "*"}, {"IfMatch": '"0123456789abcdef0123456789abcdef"'}):
        e = assert_raises(ClientError, client.complete_multipart_upload, **complete, **condition)
        assert _get_status_and_error_code(e.response) == (412, "PreconditionFailed")
    assert _get_body(client.get_object(Bucket=bucket_name, Key="foo")) == "bar", "nothing changed"
    client.complete_multipart_upload(**complete, IfMatch=etag)
    assert _get_body(client.get_object(Bucket=bucket_name, Key="foo")) == "new"
