# Server-side copies: CopyObject (same and other bucket, empty and 16 MiB objects, COPY and REPLACE
# metadata directives, onto itself, missing sources, x-amz-copy-source-if-* conditions) and
# UploadPartCopy (ranges, no range, bad ranges, special key names, several sizes).
# Ported from ceph/s3-tests s3tests_boto3/functional/test_s3.py (same test names; cases marked
# `lowtail` are this project's own: the packed, striped and multipart layouts behind a copy, boto3's
# managed copy, version ids, and a failed copy changing nothing). Upstream's cases that need ACLs, a
# second user or versioning are left out (docs/s3-tests.md).

import datetime

import pytest
from boto3.s3.transfer import TransferConfig
from botocore.exceptions import ClientError

from s3support import (
    _get_body,
    _get_status,
    _get_status_and_error_code,
    assert_raises,
    generate_random,
    get_client,
    get_new_bucket,
)

MB = 1024 * 1024


def _create_key_with_random_content(keyname, size=7 * MB, bucket_name=None, client=None):
    """A (new) bucket holding `keyname` with `size` random ASCII bytes; returns the bucket."""
    if bucket_name is None:
        bucket_name = get_new_bucket()
    if client is None:
        client = get_client()
    body = next(generate_random(size, size)) if size else ""
    client.put_object(Bucket=bucket_name, Key=keyname, Body=body.encode())
    return bucket_name


def _multipart_copy(src_bucket_name, src_key, dest_bucket_name, dest_key, size, client=None, part_size=5 * MB):
    """Starts an upload of dest_key whose parts are UploadPartCopy's of the first `size` bytes of
    the source, part_size at a time; returns (upload id, parts for the completion)."""
    if client is None:
        client = get_client()
    upload_id = client.create_multipart_upload(Bucket=dest_bucket_name, Key=dest_key)["UploadId"]
    copy_source = {"Bucket": src_bucket_name, "Key": src_key}
    parts = []
    for number, start in enumerate(range(0, size, part_size), start=1):
        end = min(start + part_size, size) - 1
        response = client.upload_part_copy(
            Bucket=dest_bucket_name,
            Key=dest_key,
            CopySource=copy_source,
            PartNumber=number,
            UploadId=upload_id,
            CopySourceRange=f"bytes={start}-{end}",
        )
        parts.append({"ETag": response["CopyPartResult"]["ETag"], "PartNumber": number})
    return (upload_id, parts)


def _check_key_content(src_key, src_bucket_name, dest_key, dest_bucket_name):
    """The destination is the source's first bytes (all of them when the sizes match)."""
    client = get_client()
    src_size = client.head_object(Bucket=src_bucket_name, Key=src_key)["ContentLength"]
    response = client.get_object(Bucket=dest_bucket_name, Key=dest_key)
    dest_size = response["ContentLength"]
    dest_data = _get_body(response)
    assert src_size >= dest_size
    response = client.get_object(Bucket=src_bucket_name, Key=src_key, Range=f"bytes=0-{dest_size - 1}")
    assert _get_body(response) == dest_data


def test_object_copy_zero_size():
    key = "foo123bar"
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key=key, Body=b"")
    client.copy({"Bucket": bucket_name, "Key": key}, bucket_name, "bar321foo")
    response = client.get_object(Bucket=bucket_name, Key="bar321foo")
    assert response["ContentLength"] == 0


def test_object_copy_16m():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="obj1", Body=bytearray(16 * MB))
    client.copy_object(Bucket=bucket_name, Key="obj2", CopySource={"Bucket": bucket_name, "Key": "obj1"})
    response = client.get_object(Bucket=bucket_name, Key="obj2")
    assert response["ContentLength"] == 16 * MB
    # lowtail: and the bytes are the source's.
    assert response["Body"].read() == bytes(16 * MB)


def test_object_copy_same_bucket():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo123bar", Body="foo")
    client.copy({"Bucket": bucket_name, "Key": "foo123bar"}, bucket_name, "bar321foo")
    response = client.get_object(Bucket=bucket_name, Key="bar321foo")
    assert _get_body(response) == "foo"


def test_object_copy_verify_contenttype():
    bucket_name = get_new_bucket()
    client = get_client()
    content_type = "text/bla"
    client.put_object(Bucket=bucket_name, ContentType=content_type, Key="foo123bar", Body="foo")
    client.copy({"Bucket": bucket_name, "Key": "foo123bar"}, bucket_name, "bar321foo")
    response = client.get_object(Bucket=bucket_name, Key="bar321foo")
    assert _get_body(response) == "foo"
    assert response["ContentType"] == content_type


def test_object_copy_to_itself():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo123bar", Body="foo")
    e = assert_raises(ClientError, client.copy, {"Bucket": bucket_name, "Key": "foo123bar"}, bucket_name, "foo123bar")
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 400
    assert error_code == "InvalidRequest"


def test_object_copy_to_itself_with_metadata():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo123bar", Body="foo")
    metadata = {"foo": "bar"}
    client.copy_object(
        Bucket=bucket_name,
        CopySource={"Bucket": bucket_name, "Key": "foo123bar"},
        Key="foo123bar",
        Metadata=metadata,
        MetadataDirective="REPLACE",
    )
    response = client.get_object(Bucket=bucket_name, Key="foo123bar")
    assert response["Metadata"] == metadata
    # lowtail: the bytes stay.
    assert _get_body(response) == "foo"


def test_object_copy_diff_bucket():
    bucket_name1 = get_new_bucket()
    bucket_name2 = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name1, Key="foo123bar", Body="foo")
    client.copy({"Bucket": bucket_name1, "Key": "foo123bar"}, bucket_name2, "bar321foo")
    response = client.get_object(Bucket=bucket_name2, Key="bar321foo")
    assert _get_body(response) == "foo"


def test_object_copy_retaining_metadata():
    for size in [3, 1024 * 1024]:
        bucket_name = get_new_bucket()
        client = get_client()
        content_type = "audio/ogg"
        metadata = {"key1": "value1", "key2": "value2"}
        client.put_object(Bucket=bucket_name, Key="foo123bar", Metadata=metadata, ContentType=content_type, Body=bytearray(size))
        client.copy_object(Bucket=bucket_name, CopySource={"Bucket": bucket_name, "Key": "foo123bar"}, Key="bar321foo")
        response = client.get_object(Bucket=bucket_name, Key="bar321foo")
        assert response["ContentType"] == content_type
        assert response["Metadata"] == metadata
        assert response["ContentLength"] == size


def test_object_copy_replacing_metadata():
    for size in [3, 1024 * 1024]:
        bucket_name = get_new_bucket()
        client = get_client()
        client.put_object(
            Bucket=bucket_name,
            Key="foo123bar",
            Metadata={"key1": "value1", "key2": "value2"},
            ContentType="audio/ogg",
            Body=bytearray(size),
        )
        metadata = {"key3": "value3", "key2": "value2"}
        content_type = "audio/mpeg"
        client.copy_object(
            Bucket=bucket_name,
            CopySource={"Bucket": bucket_name, "Key": "foo123bar"},
            Key="bar321foo",
            Metadata=metadata,
            MetadataDirective="REPLACE",
            ContentType=content_type,
        )
        response = client.get_object(Bucket=bucket_name, Key="bar321foo")
        assert response["ContentType"] == content_type
        assert response["Metadata"] == metadata
        assert response["ContentLength"] == size


def test_object_copy_bucket_not_found():
    bucket_name = get_new_bucket()
    client = get_client()
    copy_source = {"Bucket": bucket_name + "-fake", "Key": "foo123bar"}
    e = assert_raises(ClientError, client.copy, copy_source, bucket_name, "bar321foo")
    assert _get_status(e.response) == 404


def test_object_copy_key_not_found():
    bucket_name = get_new_bucket()
    client = get_client()
    e = assert_raises(ClientError, client.copy, {"Bucket": bucket_name, "Key": "foo123bar"}, bucket_name, "bar321foo")
    assert _get_status(e.response) == 404


def test_copy_object_ifmatch_good():
    bucket_name = get_new_bucket()
    client = get_client()
    etag = client.put_object(Bucket=bucket_name, Key="foo", Body="bar")["ETag"]
    client.copy_object(Bucket=bucket_name, CopySource={"Bucket": bucket_name, "Key": "foo"}, CopySourceIfMatch=etag, Key="bar")
    response = client.get_object(Bucket=bucket_name, Key="bar")
    assert _get_body(response) == "bar"


def test_copy_object_ifmatch_failed():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    e = assert_raises(
        ClientError,
        client.copy_object,
        Bucket=bucket_name,
        CopySource={"Bucket": bucket_name, "Key": "foo"},
        CopySourceIfMatch="ABCORZ",
        Key="bar",
    )
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 412
    assert error_code == "PreconditionFailed"


def test_copy_object_ifnonematch_good():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    client.copy_object(Bucket=bucket_name, CopySource={"Bucket": bucket_name, "Key": "foo"}, CopySourceIfNoneMatch="ABCORZ", Key="bar")
    response = client.get_object(Bucket=bucket_name, Key="bar")
    assert _get_body(response) == "bar"


def test_copy_object_ifnonematch_failed():
    bucket_name = get_new_bucket()
    client = get_client()
    etag = client.put_object(Bucket=bucket_name, Key="foo", Body="bar")["ETag"]
    e = assert_raises(
        ClientError,
        client.copy_object,
        Bucket=bucket_name,
        CopySource={"Bucket": bucket_name, "Key": "foo"},
        CopySourceIfNoneMatch=etag,
        Key="bar",
    )
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 412
    assert error_code == "PreconditionFailed"


def test_multipart_copy_small():
    src_key = "foo"
    src_bucket_name = _create_key_with_random_content(src_key)
    dest_bucket_name = get_new_bucket()
    dest_key = "mymultipart"
    size = 1
    client = get_client()
    (upload_id, parts) = _multipart_copy(src_bucket_name, src_key, dest_bucket_name, dest_key, size)
    client.complete_multipart_upload(Bucket=dest_bucket_name, Key=dest_key, UploadId=upload_id, MultipartUpload={"Parts": parts})
    response = client.get_object(Bucket=dest_bucket_name, Key=dest_key)
    assert response["ContentLength"] == size
    _check_key_content(src_key, src_bucket_name, dest_key, dest_bucket_name)


def test_multipart_copy_invalid_range():
    client = get_client()
    src_key = "source"
    src_bucket_name = _create_key_with_random_content(src_key, size=5)
    upload_id = client.create_multipart_upload(Bucket=src_bucket_name, Key="dest")["UploadId"]
    e = assert_raises(
        ClientError,
        client.upload_part_copy,
        Bucket=src_bucket_name,
        Key="dest",
        UploadId=upload_id,
        CopySource={"Bucket": src_bucket_name, "Key": src_key},
        CopySourceRange="bytes=0-21",
        PartNumber=1,
    )
    status, error_code = _get_status_and_error_code(e.response)
    assert status in (400, 416)
    assert error_code == "InvalidRange"


def test_multipart_copy_improper_range():
    client = get_client()
    src_key = "source"
    src_bucket_name = _create_key_with_random_content(src_key, size=5)
    upload_id = client.create_multipart_upload(Bucket=src_bucket_name, Key="dest")["UploadId"]
    for test_range in ["0-2", "bytes=0", "bytes=hello-world", "bytes=0-bar", "bytes=hello-", "bytes=0-2,3-5"]:
        e = assert_raises(
            ClientError,
            client.upload_part_copy,
            Bucket=src_bucket_name,
            Key="dest",
            UploadId=upload_id,
            CopySource={"Bucket": src_bucket_name, "Key": src_key},
            CopySourceRange=test_range,
            PartNumber=1,
        )
        status, error_code = _get_status_and_error_code(e.response)
        assert status == 400, test_range
        assert error_code == "InvalidArgument", test_range


def test_multipart_copy_without_range():
    client = get_client()
    src_key = "source"
    src_bucket_name = _create_key_with_random_content(src_key, size=10)
    dest_bucket_name = get_new_bucket()
    dest_key = "mymultipartcopy"
    upload_id = client.create_multipart_upload(Bucket=dest_bucket_name, Key=dest_key)["UploadId"]
    response = client.upload_part_copy(
        Bucket=dest_bucket_name,
        Key=dest_key,
        CopySource={"Bucket": src_bucket_name, "Key": src_key},
        PartNumber=1,
        UploadId=upload_id,
    )
    parts = [{"ETag": response["CopyPartResult"]["ETag"], "PartNumber": 1}]
    client.complete_multipart_upload(Bucket=dest_bucket_name, Key=dest_key, UploadId=upload_id, MultipartUpload={"Parts": parts})
    response = client.get_object(Bucket=dest_bucket_name, Key=dest_key)
    assert response["ContentLength"] == 10
    _check_key_content(src_key, src_bucket_name, dest_key, dest_bucket_name)


def test_multipart_copy_special_names():
    src_bucket_name = get_new_bucket()
    dest_bucket_name = get_new_bucket()
    dest_key = "mymultipart"
    size = 1
    client = get_client()
    for src_key in (" ", "_", "__", "?versionId"):
        _create_key_with_random_content(src_key, bucket_name=src_bucket_name)
        (upload_id, parts) = _multipart_copy(src_bucket_name, src_key, dest_bucket_name, dest_key, size)
        client.complete_multipart_upload(Bucket=dest_bucket_name, Key=dest_key, UploadId=upload_id, MultipartUpload={"Parts": parts})
        response = client.get_object(Bucket=dest_bucket_name, Key=dest_key)
        assert response["ContentLength"] == size
        _check_key_content(src_key, src_bucket_name, dest_key, dest_bucket_name)


def test_multipart_copy_multiple_sizes():
    src_key = "foo"
    src_bucket_name = _create_key_with_random_content(src_key, 12 * MB)
    dest_bucket_name = get_new_bucket()
    dest_key = "mymultipart"
    client = get_client()
    # Upstream copies six sizes from 5 MiB to 10.6 MiB; three of them (one part, a short second
    # part, three parts) cover the same cases in half the time.
    for size in [5 * MB, 5 * MB + 100 * 1024, 10 * MB + 600 * 1024]:
        (upload_id, parts) = _multipart_copy(src_bucket_name, src_key, dest_bucket_name, dest_key, size)
        client.complete_multipart_upload(Bucket=dest_bucket_name, Key=dest_key, UploadId=upload_id, MultipartUpload={"Parts": parts})
        _check_key_content(src_key, src_bucket_name, dest_key, dest_bucket_name)


@pytest.mark.lowtail
def test_object_copy_every_layout():
    """Packed (at most 64 KiB), striped (one and several stripes) and multipart sources, copied
    within and across buckets: the same bytes and the source's ETag."""
    src = get_new_bucket()
    dest = get_new_bucket()
    client = get_client()
    sources = {f"size-{size}": next(generate_random(size, size)).encode() for size in [1, 10, 64 * 1024, 64 * 1024 + 1, 9 * MB]}
    for key, body in sources.items():
        client.put_object(Bucket=src, Key=key, Body=body)
    upload_id = client.create_multipart_upload(Bucket=src, Key="multipart")["UploadId"]
    parts, whole = [], b""
    for number, part in enumerate(generate_random(6 * MB, 5 * MB), start=1):
        response = client.upload_part(Bucket=src, Key="multipart", UploadId=upload_id, PartNumber=number, Body=part)
        parts.append({"ETag": response["ETag"], "PartNumber": number})
        whole += part.encode()
    client.complete_multipart_upload(Bucket=src, Key="multipart", UploadId=upload_id, MultipartUpload={"Parts": parts})
    sources["multipart"] = whole
    for key, body in sources.items():
        etag = client.head_object(Bucket=src, Key=key)["ETag"]
        for bucket, target in [(src, key + ".copy"), (dest, key)]:
            response = client.copy_object(Bucket=bucket, Key=target, CopySource={"Bucket": src, "Key": key})
            assert response["CopyObjectResult"]["ETag"] == etag, key
            assert isinstance(response["CopyObjectResult"]["LastModified"], datetime.datetime)
            got = client.get_object(Bucket=bucket, Key=target)
            assert got["ETag"] == etag, key
            assert got["Body"].read() == body, f"{bucket}/{target}"
    # The copies do not depend on their sources.
    for key in sources:
        client.delete_object(Bucket=src, Key=key)
    for key, body in sources.items():
        assert client.get_object(Bucket=dest, Key=key)["Body"].read() == body, key


@pytest.mark.lowtail
def test_object_copy_managed_multipart():
    """boto3's managed copy of an object above its 8 MiB threshold (what aws-cli's `s3 cp` between
    buckets does): HeadObject, CreateMultipartUpload with the metadata given (aws-cli passes the
    source's), then UploadPartCopy part by part, each conditional on the source's ETag."""
    src = get_new_bucket()
    dest = get_new_bucket()
    client = get_client()
    body = next(generate_random(17 * MB, 17 * MB)).encode()
    client.put_object(Bucket=src, Key="big", Body=body)
    client.copy(
        {"Bucket": src, "Key": "big"},
        dest,
        "big",
        # REPLACE: since s3transfer 0.19 a managed copy keeps the source's metadata unless told to
        # replace it, as CopyObject does (older ones always sent what ExtraArgs gave).
        ExtraArgs={"ContentType": "text/bla", "Metadata": {"foo": "bar"}, "MetadataDirective": "REPLACE"},
        Config=TransferConfig(multipart_threshold=8 * MB, multipart_chunksize=8 * MB),
    )
    response = client.get_object(Bucket=dest, Key="big")
    assert response["ETag"].endswith('-3"'), response["ETag"]
    assert response["ContentType"] == "text/bla"
    assert response["Metadata"] == {"foo": "bar"}
    assert response["Body"].read() == body


@pytest.mark.lowtail
def test_object_copy_version_id():
    """Buckets are unversioned: the source's `null` version is the object, any other is absent."""
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    source = {"Bucket": bucket_name, "Key": "foo", "VersionId": "null"}
    client.copy_object(Bucket=bucket_name, Key="copy", CopySource=source)
    assert _get_body(client.get_object(Bucket=bucket_name, Key="copy")) == "bar"
    source["VersionId"] = "3HL4kqtJlcpXroDTDmJ"
    e = assert_raises(ClientError, client.copy_object, Bucket=bucket_name, Key="copy2", CopySource=source)
    assert _get_status_and_error_code(e.response) == (404, "NoSuchVersion")


@pytest.mark.lowtail
def test_copy_object_if_modified_conditions():
    """x-amz-copy-source-if-(un)modified-since: 412 when they do not hold (a copy never answers 304)."""
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="foo", Body="bar")
    now = datetime.datetime.now(datetime.timezone.utc)
    past, future = now - datetime.timedelta(hours=1), now + datetime.timedelta(hours=1)
    source = {"Bucket": bucket_name, "Key": "foo"}
    for condition in [{"CopySourceIfModifiedSince": future}, {"CopySourceIfUnmodifiedSince": past}]:
        e = assert_raises(ClientError, client.copy_object, Bucket=bucket_name, Key="bar", CopySource=source, **condition)
        assert _get_status_and_error_code(e.response) == (412, "PreconditionFailed"), condition
    for condition in [{"CopySourceIfModifiedSince": past}, {"CopySourceIfUnmodifiedSince": future}]:
        client.copy_object(Bucket=bucket_name, Key="bar", CopySource=source, **condition)
        assert _get_body(client.get_object(Bucket=bucket_name, Key="bar")) == "bar"


@pytest.mark.lowtail
def test_object_copy_failed_changes_nothing():
    """A refused copy leaves the destination's old version (bytes, ETag, metadata) in place."""
    bucket_name = get_new_bucket()
    client = get_client()
    old = client.put_object(Bucket=bucket_name, Key="dest", Body="old", Metadata={"v": "1"})["ETag"]
    etag = client.put_object(Bucket=bucket_name, Key="source", Body="new")["ETag"]
    refused = [
        ({"CopySource": {"Bucket": bucket_name, "Key": "missing"}}, (404, "NoSuchKey")),
        ({"CopySource": {"Bucket": bucket_name + "-fake", "Key": "source"}}, (404, "NoSuchBucket")),
        ({"CopySource": {"Bucket": bucket_name, "Key": "source"}, "CopySourceIfNoneMatch": etag}, (412, "PreconditionFailed")),
        ({"CopySource": f"{bucket_name}-no-slash"}, (400, "InvalidArgument")),
    ]
    for args, expected in refused:
        e = assert_raises(ClientError, client.copy_object, Bucket=bucket_name, Key="dest", **args)
        assert _get_status_and_error_code(e.response) == expected, args
    response = client.get_object(Bucket=bucket_name, Key="dest")
    assert (response["ETag"], response["Metadata"], _get_body(response)) == (old, {"v": "1"}, "old")
