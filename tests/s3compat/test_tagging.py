# Tagging: object tags (PutObjectTagging, GetObjectTagging, DeleteObjectTagging, `x-amz-tagging` on
# PutObject and CreateMultipartUpload, `x-amz-tagging-count` on GET / HEAD) and bucket tags. Ported from
# ceph/s3-tests s3tests/functional/test_s3.py (same test names; cases marked `lowtail` are this project's
# own). Assertions are upstream's unless a comment says why not. Upstream's POST-object and ACL/policy
# tagging cases are not ported (lowtail has neither).

import random
import string

import pytest
from botocore.exceptions import ClientError

from s3support import _get_body, _get_status_and_error_code, assert_raises, get_client, get_new_bucket


def _create_key_with_random_content(keyname, size=7 * 1024 * 1024):
    bucket_name = get_new_bucket()
    body = "".join(random.choice(string.ascii_letters) for _ in range(1024)) * (size // 1024)
    get_client().put_object(Bucket=bucket_name, Key=keyname, Body=body.encode())
    return bucket_name


def _create_simple_tagset(count):
    return {"TagSet": [{"Key": str(i), "Value": str(i)} for i in range(count)]}


def _make_random_string(size):
    return "".join(random.choice(string.ascii_letters) for _ in range(size))


def test_set_bucket_tagging():
    bucket_name = get_new_bucket()
    client = get_client()
    tags = {"TagSet": [{"Key": "Hello", "Value": "World"}]}
    e = assert_raises(ClientError, client.get_bucket_tagging, Bucket=bucket_name)
    assert _get_status_and_error_code(e.response) == (404, "NoSuchTagSet")
    client.put_bucket_tagging(Bucket=bucket_name, Tagging=tags)
    response = client.get_bucket_tagging(Bucket=bucket_name)
    assert response["TagSet"] == [{"Key": "Hello", "Value": "World"}]
    response = client.delete_bucket_tagging(Bucket=bucket_name)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 204
    e = assert_raises(ClientError, client.get_bucket_tagging, Bucket=bucket_name)
    assert _get_status_and_error_code(e.response) == (404, "NoSuchTagSet")


def test_set_multipart_tagging():
    bucket_name = get_new_bucket()
    client = get_client()
    key = "mymultipart"
    upload_id = client.create_multipart_upload(Bucket=bucket_name, Key=key, Tagging="Hello=World&foo=bar")["UploadId"]
    part = client.upload_part(Bucket=bucket_name, Key=key, UploadId=upload_id, PartNumber=1, Body=b"x")
    parts = {"Parts": [{"PartNumber": 1, "ETag": part["ETag"]}]}
    client.complete_multipart_upload(Bucket=bucket_name, Key=key, UploadId=upload_id, MultipartUpload=parts)
    response = client.get_object_tagging(Bucket=bucket_name, Key=key)
    assert response["TagSet"] == [{"Key": "Hello", "Value": "World"}, {"Key": "foo", "Value": "bar"}]
    response = client.delete_object_tagging(Bucket=bucket_name, Key=key)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert client.get_object_tagging(Bucket=bucket_name, Key=key)["TagSet"] == []


def test_get_obj_tagging():
    key = "testputtags"
    bucket_name = _create_key_with_random_content(key)
    client = get_client()
    input_tagset = _create_simple_tagset(2)
    response = client.put_object_tagging(Bucket=bucket_name, Key=key, Tagging=input_tagset)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200
    response = client.get_object_tagging(Bucket=bucket_name, Key=key)
    assert response["TagSet"] == input_tagset["TagSet"]


def test_get_obj_head_tagging():
    key = "testputtags"
    bucket_name = _create_key_with_random_content(key)
    client = get_client()
    client.put_object_tagging(Bucket=bucket_name, Key=key, Tagging=_create_simple_tagset(2))
    response = client.head_object(Bucket=bucket_name, Key=key)
    assert response["ResponseMetadata"]["HTTPHeaders"]["x-amz-tagging-count"] == "2"


def test_put_max_tags():
    key = "testputmaxtags"
    bucket_name = _create_key_with_random_content(key)
    client = get_client()
    input_tagset = _create_simple_tagset(10)
    client.put_object_tagging(Bucket=bucket_name, Key=key, Tagging=input_tagset)
    # Upstream compares in insertion order; tags come back sorted by key ("0".."9" either way).
    assert client.get_object_tagging(Bucket=bucket_name, Key=key)["TagSet"] == input_tagset["TagSet"]


def test_put_excess_tags():
    key = "testputmaxtags"
    bucket_name = _create_key_with_random_content(key)
    client = get_client()
    e = assert_raises(
        ClientError, client.put_object_tagging, Bucket=bucket_name, Key=key, Tagging=_create_simple_tagset(11)
    )
    assert _get_status_and_error_code(e.response) == (400, "InvalidTag")
    assert len(client.get_object_tagging(Bucket=bucket_name, Key=key)["TagSet"]) == 0


def test_put_max_kvsize_tags():
    key = "testputmaxkeysize"
    bucket_name = _create_key_with_random_content(key)
    client = get_client()
    tagset = [{"Key": _make_random_string(128), "Value": _make_random_string(256)} for _ in range(10)]
    client.put_object_tagging(Bucket=bucket_name, Key=key, Tagging={"TagSet": tagset})
    for kv_pair in client.get_object_tagging(Bucket=bucket_name, Key=key)["TagSet"]:
        assert kv_pair in tagset


@pytest.mark.parametrize("key_chars,value_chars", [(129, 256), (128, 257)])
def test_put_excess_key_and_val_tags(key_chars, value_chars):
    # Upstream's test_put_excess_key_tags and test_put_excess_val_tags, as one parametrized case.
    key = "testputexcesskeytags"
    bucket_name = _create_key_with_random_content(key)
    client = get_client()
    tagset = [{"Key": _make_random_string(key_chars), "Value": _make_random_string(value_chars)} for _ in range(10)]
    e = assert_raises(ClientError, client.put_object_tagging, Bucket=bucket_name, Key=key, Tagging={"TagSet": tagset})
    assert _get_status_and_error_code(e.response) == (400, "InvalidTag")
    assert len(client.get_object_tagging(Bucket=bucket_name, Key=key)["TagSet"]) == 0


def test_put_modify_tags():
    key = "testputmodifytags"
    bucket_name = _create_key_with_random_content(key)
    client = get_client()
    input_tagset = {"TagSet": [{"Key": "key", "Value": "val"}, {"Key": "key2", "Value": "val2"}]}
    client.put_object_tagging(Bucket=bucket_name, Key=key, Tagging=input_tagset)
    assert client.get_object_tagging(Bucket=bucket_name, Key=key)["TagSet"] == input_tagset["TagSet"]
    input_tagset2 = {"TagSet": [{"Key": "key3", "Value": "val3"}]}
    client.put_object_tagging(Bucket=bucket_name, Key=key, Tagging=input_tagset2)
    assert client.get_object_tagging(Bucket=bucket_name, Key=key)["TagSet"] == input_tagset2["TagSet"]


def test_put_delete_tags():
    key = "testputmodifytags"
    bucket_name = _create_key_with_random_content(key)
    client = get_client()
    input_tagset = _create_simple_tagset(2)
    client.put_object_tagging(Bucket=bucket_name, Key=key, Tagging=input_tagset)
    assert client.get_object_tagging(Bucket=bucket_name, Key=key)["TagSet"] == input_tagset["TagSet"]
    response = client.delete_object_tagging(Bucket=bucket_name, Key=key)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 204
    assert len(client.get_object_tagging(Bucket=bucket_name, Key=key)["TagSet"]) == 0


def test_put_obj_with_tags():
    bucket_name = get_new_bucket()
    client = get_client()
    key = "testtagobj1"
    data = "A" * 100
    client.put_object(Bucket=bucket_name, Key=key, Body=data, Tagging="foo=bar&bar")
    assert _get_body(client.get_object(Bucket=bucket_name, Key=key)) == data
    response_tagset = client.get_object_tagging(Bucket=bucket_name, Key=key)["TagSet"]
    assert response_tagset == [{"Key": "bar", "Value": ""}, {"Key": "foo", "Value": "bar"}]


@pytest.mark.lowtail
def test_tags_follow_copies_and_bad_sets_store_nothing():
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="src", Body=b"x", Tagging="team=storage")
    assert client.get_object(Bucket=bucket_name, Key="src")["TagCount"] == 1
    source = {"Bucket": bucket_name, "Key": "src"}
    client.copy_object(Bucket=bucket_name, Key="copied", CopySource=source)
    assert client.get_object_tagging(Bucket=bucket_name, Key="copied")["TagSet"] == [{"Key": "team", "Value": "storage"}]
    client.copy_object(Bucket=bucket_name, Key="retagged", CopySource=source, TaggingDirective="REPLACE", Tagging="a=1")
    assert client.get_object_tagging(Bucket=bucket_name, Key="retagged")["TagSet"] == [{"Key": "a", "Value": "1"}]
    for bad in ("a=1&a=2", "aws:reserved=1", "a=<b>"):
        e = assert_raises(ClientError, client.put_object, Bucket=bucket_name, Key="bad", Body=b"x", Tagging=bad)
        assert _get_status_and_error_code(e.response) == (400, "InvalidTag")
    keys = [o["Key"] for o in client.list_objects_v2(Bucket=bucket_name)["Contents"]]
    assert keys == ["copied", "retagged", "src"], "nothing stored for a refused tag set"
    e = assert_raises(ClientError, client.get_object_tagging, Bucket=bucket_name, Key="src", VersionId="v2")
    assert _get_status_and_error_code(e.response) == (404, "NoSuchVersion")
    e = assert_raises(ClientError, client.put_object_tagging, Bucket=bucket_name, Key="gone", Tagging={"TagSet": []})
    assert _get_status_and_error_code(e.response) == (404, "NoSuchKey")
