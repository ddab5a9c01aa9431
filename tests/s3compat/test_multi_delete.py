# Multi-object delete (DeleteObjects): verbose and quiet answers, keys that do not exist, the
# 1000-key limit, a missing bucket. Ported from ceph/s3-tests s3tests_boto3/functional/test_s3.py
# (same test names; cases marked `lowtail` are this project's own). Assertions are upstream's unless
# a comment says why not.

import pytest
from botocore.exceptions import ClientError

from s3support import (
    _create_objects,
    _get_keys,
    _get_status_and_error_code,
    assert_raises,
    get_client,
    get_new_bucket,
)


def _make_objs_dict(key_names):
    return {"Objects": [{"Key": key} for key in key_names]}


def test_multi_object_delete():
    key_names = ["key0", "key1", "key2"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.list_objects(Bucket=bucket_name)
    assert len(response["Contents"]) == 3
    objs_dict = _make_objs_dict(key_names=key_names)
    response = client.delete_objects(Bucket=bucket_name, Delete=objs_dict)
    assert len(response["Deleted"]) == 3
    assert "Errors" not in response
    response = client.list_objects(Bucket=bucket_name)
    assert "Contents" not in response
    # Keys that are already gone are reported deleted, as S3 does.
    response = client.delete_objects(Bucket=bucket_name, Delete=objs_dict)
    assert len(response["Deleted"]) == 3
    assert "Errors" not in response
    response = client.list_objects(Bucket=bucket_name)
    assert "Contents" not in response


def test_multi_objectv2_delete():
    key_names = ["key0", "key1", "key2"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name)
    assert len(response["Contents"]) == 3
    objs_dict = _make_objs_dict(key_names=key_names)
    response = client.delete_objects(Bucket=bucket_name, Delete=objs_dict)
    assert len(response["Deleted"]) == 3
    assert "Errors" not in response
    response = client.list_objects_v2(Bucket=bucket_name)
    assert "Contents" not in response
    response = client.delete_objects(Bucket=bucket_name, Delete=objs_dict)
    assert len(response["Deleted"]) == 3
    assert "Errors" not in response
    response = client.list_objects_v2(Bucket=bucket_name)
    assert "Contents" not in response


def test_multi_object_delete_key_limit():
    key_names = [f"key-{i}" for i in range(1001)]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    paginator = client.get_paginator("list_objects")
    num_keys = sum(len(page["Contents"]) for page in paginator.paginate(Bucket=bucket_name))
    assert num_keys == 1001
    objs_dict = _make_objs_dict(key_names=key_names)
    e = assert_raises(ClientError, client.delete_objects, Bucket=bucket_name, Delete=objs_dict)
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 400
    # lowtail: the refused request deleted nothing (v2 paginator: upstream's _v2 twin).
    paginator = client.get_paginator("list_objects_v2")
    assert sum(len(page["Contents"]) for page in paginator.paginate(Bucket=bucket_name)) == 1001


@pytest.mark.lowtail
def test_multi_object_delete_quiet():
    key_names = ["key0", "key1", "key2"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.delete_objects(Bucket=bucket_name, Delete={"Objects": [{"Key": "key0"}, {"Key": "key2"}], "Quiet": True})
    # Quiet: only errors are reported, and there are none.
    assert "Deleted" not in response
    assert "Errors" not in response
    assert _get_keys(client.list_objects_v2(Bucket=bucket_name)) == ["key1"]


@pytest.mark.lowtail
def test_multi_object_delete_mixed():
    # Existing and missing keys together: every key is reported deleted, the existing ones are gone,
    # and keys not named stay.
    bucket_name = _create_objects(keys=["a", "b", "c"])
    client = get_client()
    response = client.delete_objects(Bucket=bucket_name, Delete=_make_objs_dict(["a", "missing", "c"]))
    assert sorted(d["Key"] for d in response["Deleted"]) == ["a", "c", "missing"]
    assert "Errors" not in response
    assert _get_keys(client.list_objects_v2(Bucket=bucket_name)) == ["b"]


@pytest.mark.lowtail
def test_multi_object_delete_bucket_not_exist():
    bucket_name = get_new_bucket()
    client = get_client()
    client.delete_bucket(Bucket=bucket_name)
    e = assert_raises(ClientError, client.delete_objects, Bucket=bucket_name, Delete=_make_objs_dict(["a"]))
    assert _get_status_and_error_code(e.response) == (404, "NoSuchBucket")


@pytest.mark.lowtail
def test_multi_object_delete_key_too_long():
    # A bad key is an error entry for that key, not a failure of the whole request.
    bucket_name = _create_objects(keys=["a"])
    client = get_client()
    response = client.delete_objects(Bucket=bucket_name, Delete=_make_objs_dict(["a", "k" * 1025]))
    assert [d["Key"] for d in response["Deleted"]] == ["a"]
    assert [(e["Key"], e["Code"]) for e in response["Errors"]] == [("k" * 1025, "KeyTooLongError")]


def _delete_with_content_md5(client, bucket_name, keys, content_md5):
    # botocore computes its own checksum header; this one is set just before signing, so it is the
    # Content-MD5 the gateway sees, signed.
    def set_md5(request, **kwargs):
        # HTTPHeaders appends on assignment: replace, do not add a second header.
        del request.headers["Content-MD5"]
        request.headers["Content-MD5"] = content_md5

    client.meta.events.register("before-sign.s3.DeleteObjects", set_md5)
    try:
        return client.delete_objects(Bucket=bucket_name, Delete=_make_objs_dict(keys))
    finally:
        client.meta.events.unregister("before-sign.s3.DeleteObjects", set_md5)


@pytest.mark.lowtail
@pytest.mark.parametrize(
    "content_md5,code",
    [("1B2M2Y8AsgTpgAmY7PhCfg==", "BadDigest"), ("not base64!", "InvalidDigest"), ("AAAA", "InvalidDigest")],
)
def test_multi_object_delete_bad_content_md5(content_md5, code):
    # A DeleteObjects whose Content-MD5 is not its body's is refused and deletes nothing (before,
    # s3s parsed the body without checking it and every key was deleted).
    key_names = ["key0", "key1"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    e = assert_raises(ClientError, _delete_with_content_md5, client, bucket_name, key_names, content_md5)
    status, error_code = _get_status_and_error_code(e.response)
    assert (status, error_code) == (400, code)
    assert _get_keys(client.list_objects(Bucket=bucket_name)) == key_names


@pytest.mark.lowtail
def test_multi_object_delete_good_content_md5():
    import base64
    import hashlib

    key_names = ["key0"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    body = {}

    def capture(request, **kwargs):
        body["md5"] = base64.b64encode(hashlib.md5(request.body).digest()).decode()
        del request.headers["Content-MD5"]
        request.headers["Content-MD5"] = body["md5"]

    client.meta.events.register("before-sign.s3.DeleteObjects", capture)
    try:
        response = client.delete_objects(Bucket=bucket_name, Delete=_make_objs_dict(key_names))
    finally:
        client.meta.events.unregister("before-sign.s3.DeleteObjects", capture)
    assert len(response["Deleted"]) == 1
    assert "Contents" not in client.list_objects(Bucket=bucket_name)
