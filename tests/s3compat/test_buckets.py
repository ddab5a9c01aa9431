# Buckets: create, delete, head, list, names, BucketNotEmpty, NoSuchBucket.
# Ported from ceph/s3-tests s3tests_boto3/functional/test_s3.py (same test names; cases marked
# `lowtail` are this project's own). Assertions are upstream's unless a comment says why not.

import datetime

import pytest
from botocore.exceptions import ClientError

import s3support

from s3support import (
    _create_objects,
    _get_keys,
    _get_status_and_error_code,
    assert_raises,
    get_client,
    get_new_bucket,
    get_new_bucket_name,
    get_new_bucket_resource,
    get_prefix,
    remember_bucket,
)


def _bucket_is_empty(bucket):
    for _ in bucket.objects.all():
        return False
    return True


def test_bucket_list_empty():
    bucket = get_new_bucket_resource()
    assert _bucket_is_empty(bucket)


def test_bucket_list_distinct():
    bucket1 = get_new_bucket_resource()
    bucket2 = get_new_bucket_resource()
    bucket1.put_object(Body="str", Key="asdf")
    assert _bucket_is_empty(bucket2)


def test_bucket_notexist():
    bucket_name = get_new_bucket_name()
    client = get_client()
    e = assert_raises(ClientError, client.list_objects, Bucket=bucket_name)
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 404
    assert error_code == "NoSuchBucket"


def test_bucketv2_notexist():
    bucket_name = get_new_bucket_name()
    client = get_client()
    e = assert_raises(ClientError, client.list_objects_v2, Bucket=bucket_name)
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 404
    assert error_code == "NoSuchBucket"


def test_bucket_delete_notexist():
    bucket_name = get_new_bucket_name()
    client = get_client()
    e = assert_raises(ClientError, client.delete_bucket, Bucket=bucket_name)
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 404
    assert error_code == "NoSuchBucket"


def test_bucket_delete_nonempty():
    bucket_name = _create_objects(keys=["foo"])
    client = get_client()
    e = assert_raises(ClientError, client.delete_bucket, Bucket=bucket_name)
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 409
    assert error_code == "BucketNotEmpty"
    # lowtail: the refused delete changed nothing.
    assert _get_keys(client.list_objects(Bucket=bucket_name)) == ["foo"]


@pytest.mark.lowtail
def test_bucket_delete_with_pending_upload():
    # S3 deletes a bucket that holds no objects whatever multipart uploads are pending (a crashed
    # upload must not make `aws s3 rb --force`, `rclone purge` or `s3cmd rb --recursive` fail);
    # the uploads go with it.
    bucket_name = get_new_bucket()
    client = get_client()
    upload_id = client.create_multipart_upload(Bucket=bucket_name, Key="crashed")["UploadId"]
    client.upload_part(Bucket=bucket_name, Key="crashed", UploadId=upload_id, PartNumber=1, Body=b"x" * 1024)
    client.delete_bucket(Bucket=bucket_name)
    e = assert_raises(ClientError, client.head_bucket, Bucket=bucket_name)
    status, _ = _get_status_and_error_code(e.response)
    assert status == 404
    client.create_bucket(Bucket=bucket_name)
    assert client.list_multipart_uploads(Bucket=bucket_name).get("Uploads", []) == []


def test_object_write_to_nonexist_bucket():
    bucket_name = "whatchutalkinboutwillis"
    client = get_client()
    e = assert_raises(ClientError, client.put_object, Bucket=bucket_name, Key="foo", Body="foo")
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 404
    assert error_code == "NoSuchBucket"


def test_bucket_create_delete():
    bucket_name = get_new_bucket()
    client = get_client()
    client.delete_bucket(Bucket=bucket_name)
    e = assert_raises(ClientError, client.delete_bucket, Bucket=bucket_name)
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 404
    assert error_code == "NoSuchBucket"


def test_bucket_head():
    bucket_name = get_new_bucket()
    client = get_client()
    response = client.head_bucket(Bucket=bucket_name)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_bucket_head_notexist():
    bucket_name = get_new_bucket_name()
    client = get_client()
    e = assert_raises(ClientError, client.head_bucket, Bucket=bucket_name)
    status, error_code = _get_status_and_error_code(e.response)
    # A HEAD answer has no body, so boto3 reports the status as the code (as upstream notes).
    assert status == 404
    assert error_code == "404"


def test_bucket_create_exists():
    # Upstream accepts either a 200 (AWS us-east-1's legacy answer) or 409 BucketAlreadyOwnedByYou;
    # lowtail always answers 409, which this pins.
    bucket_name = get_new_bucket_name()
    client = get_client()
    client.create_bucket(Bucket=bucket_name)
    e = assert_raises(ClientError, client.create_bucket, Bucket=bucket_name)
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 409
    assert error_code == "BucketAlreadyOwnedByYou"


def test_bucket_recreate_not_overriding():
    key_names = ["mykey1", "mykey2"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    objs_list = _get_keys(client.list_objects(Bucket=bucket_name))
    assert key_names == objs_list
    assert_raises(ClientError, client.create_bucket, Bucket=bucket_name)
    objs_list = _get_keys(client.list_objects(Bucket=bucket_name))
    assert key_names == objs_list


def test_bucket_get_location():
    # Upstream creates with the configured api_name as LocationConstraint; the default region's
    # answer is an empty constraint, which boto3 reports as None.
    bucket_name = get_new_bucket()
    client = get_client()
    response = client.get_bucket_location(Bucket=bucket_name)
    assert response.get("LocationConstraint") in (None, "")


def test_buckets_create_then_list():
    client = get_client()
    bucket_names = [get_new_bucket_name() for _ in range(5)]
    for name in bucket_names:
        client.create_bucket(Bucket=name)
    response = client.list_buckets()
    listed = [bucket["Name"] for bucket in response["Buckets"]]
    for name in bucket_names:
        assert name in listed, f"S3 implementation's GET on Service did not return bucket we created: {name}"


def test_buckets_list_ctime():
    # check that creation times are within a day
    before = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(days=1)
    client = get_client()
    for _ in range(5):
        get_new_bucket(client)
    response = client.list_buckets()
    ours = [b for b in response["Buckets"] if b["Name"].startswith(get_prefix())]
    assert len(ours) == 5
    for bucket in ours:
        assert before <= bucket["CreationDate"], bucket


def test_bucket_create_special_key_names():
    key_names = [" ", '"', "$", "%", "&", "'", "<", ">", "_", "_ ", "_ _", "__"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    objs_list = _get_keys(client.list_objects(Bucket=bucket_name))
    assert key_names == objs_list
    for name in key_names:
        assert name in objs_list
        response = client.get_object(Bucket=bucket_name, Key=name)
        assert response["Body"].read().decode() == name


def test_bucket_list_special_prefix():
    key_names = ["_bla/1", "_bla/2", "_bla/3", "_bla/4", "abcd"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    objs_list = _get_keys(client.list_objects(Bucket=bucket_name))
    assert len(objs_list) == 5
    objs_list = _get_keys(client.list_objects(Bucket=bucket_name, Prefix="_bla/"))
    assert len(objs_list) == 4


def check_bad_bucket_name(bucket_name):
    """Creating bucket_name fails with 400 InvalidBucketName."""
    client = get_client()
    e = assert_raises(ClientError, client.create_bucket, Bucket=bucket_name)
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 400
    assert error_code == "InvalidBucketName"


def check_invalid_bucketname(invalid_name):
    """Sends CreateBucket for invalid_name past botocore's client-side name check (by rewriting the
    URL of a valid name), returning status and error code."""
    client = get_client()
    valid_bucket_name = get_new_bucket_name()

    def replace_bucketname_from_url(**kwargs):
        kwargs["params"]["url"] = kwargs["params"]["url"].replace(valid_bucket_name, invalid_name)

    client.meta.events.register("before-call.s3.CreateBucket", replace_bucketname_from_url)
    e = assert_raises(ClientError, client.create_bucket, Bucket=valid_bucket_name)
    return _get_status_and_error_code(e.response)


def check_good_bucket_name(name, _prefix=None):
    if _prefix is None:
        _prefix = get_prefix()
    bucket_name = f"{_prefix}{name}"
    remember_bucket(bucket_name)
    response = get_client().create_bucket(Bucket=bucket_name)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200


def _test_bucket_create_naming_good_long(length):
    prefix = get_new_bucket_name()
    assert len(prefix) < 63
    bucket_name = prefix + (length - len(prefix)) * "a"
    remember_bucket(bucket_name)
    response = get_client().create_bucket(Bucket=bucket_name)
    assert response["ResponseMetadata"]["HTTPStatusCode"] == 200


def test_bucket_create_naming_bad_starts_nonalpha():
    bucket_name = get_new_bucket_name()
    check_bad_bucket_name("_" + bucket_name)


def test_bucket_create_naming_bad_short_one():
    check_bad_bucket_name("a")


def test_bucket_create_naming_bad_short_two():
    check_bad_bucket_name("aa")


def test_bucket_create_naming_bad_long():
    # Upstream's _test_bucket_create_naming_bad_long(64): one byte over S3's 63.
    status, error_code = check_invalid_bucketname(64 * "a")
    assert status == 400
    assert error_code == "InvalidBucketName"


def test_bucket_create_naming_bad_ip():
    check_bad_bucket_name("192.168.5.123")


def test_bucket_create_naming_bad_punctuation():
    # characters other than [a-zA-Z0-9._-]
    status, error_code = check_invalid_bucketname("alpha!soup")
    assert status == 400
    assert error_code == "InvalidBucketName"


@pytest.mark.parametrize("length", [60, 61, 62, 63])
def test_bucket_create_naming_good_long(length):
    # Upstream's test_bucket_create_naming_good_long_60 ... _63.
    _test_bucket_create_naming_good_long(length)


def test_bucket_list_long_name():
    prefix = get_new_bucket_name()
    name = prefix + (61 - len(prefix)) * "a"
    bucket = get_new_bucket_resource(name=name)
    assert _bucket_is_empty(bucket)


def test_bucket_create_naming_good_starts_alpha():
    check_good_bucket_name("foo", _prefix="a" + get_prefix())


def test_bucket_create_naming_good_starts_digit():
    check_good_bucket_name("foo", _prefix="0" + get_prefix())


def test_bucket_create_naming_good_contains_period():
    check_good_bucket_name("aaa.111")


def test_bucket_create_naming_good_contains_hyphen():
    check_good_bucket_name("aaa-111")


def test_bucket_create_naming_dns_underscore():
    status, error_code = check_invalid_bucketname("foo_bar")
    assert status == 400
    assert error_code == "InvalidBucketName"


def test_bucket_create_naming_dns_long():
    prefix = get_prefix()
    assert len(prefix) < 50
    check_good_bucket_name((63 - len(prefix)) * "a")


def test_bucket_create_naming_dns_dash_at_end():
    status, error_code = check_invalid_bucketname("foo-")
    assert status == 400
    assert error_code == "InvalidBucketName"


def test_bucket_create_naming_dns_dot_dot():
    status, error_code = check_invalid_bucketname("foo..bar")
    assert status == 400
    assert error_code == "InvalidBucketName"


def test_bucket_create_naming_dns_dot_dash():
    status, error_code = check_invalid_bucketname("foo.-bar")
    assert status == 400
    assert error_code == "InvalidBucketName"


def test_bucket_create_naming_dns_dash_dot():
    status, error_code = check_invalid_bucketname("foo-.bar")
    assert status == 400
    assert error_code == "InvalidBucketName"


@pytest.mark.lowtail
@pytest.mark.skipif(not s3support.botocore_at_least(1, 35), reason="ListBuckets paging came with botocore 1.35")
def test_list_buckets_paged_by_max_buckets_and_prefix():
    client = get_client()
    names = sorted(get_new_bucket(client) for _ in range(3))
    prefix = get_prefix()
    seen = []
    token = None
    for _ in range(10):
        kwargs = {"MaxBuckets": 2, "Prefix": prefix}
        if token:
            kwargs["ContinuationToken"] = token
        page = client.list_buckets(**kwargs)
        assert len(page["Buckets"]) <= 2
        assert page["Prefix"] == prefix
        seen += [b["Name"] for b in page["Buckets"]]
        token = page.get("ContinuationToken")
        if not token:
            break
    assert len(seen) == len(set(seen)) and [n for n in seen if n in names] == names
    e = assert_raises(ClientError, client.list_buckets, MaxBuckets=10001)
    assert _get_status_and_error_code(e.response) == (400, "InvalidArgument")


@pytest.mark.lowtail
def test_invalid_bucket_name_error_has_message_and_request_id():
    # s3s refuses such a name while parsing the path, before a handler runs; the document still
    # carries AWS's message and the request id, as every error document does.
    response = s3support.signed_raw("GET", "/ab/key", b"", {"x-amz-content-sha256": "UNSIGNED-PAYLOAD"})
    assert response.status == 400
    body = response.data.decode()
    assert "<Code>InvalidBucketName</Code>" in body
    assert "<Message>The specified bucket is not valid.</Message>" in body
    assert f"<RequestId>{response.headers['x-amz-request-id']}</RequestId>" in body
    import urllib3

    anonymous = urllib3.PoolManager(retries=False).request("GET", s3support.settings().endpoint + "/")
    assert anonymous.status == 403
    assert f"<RequestId>{anonymous.headers['x-amz-request-id']}</RequestId>" in anonymous.data.decode()


@pytest.mark.lowtail
def test_head_bucket_names_its_arn_and_put_its_size():
    bucket_name = get_new_bucket()
    client = get_client()
    head = client.head_bucket(Bucket=bucket_name)
    assert head["ResponseMetadata"]["HTTPHeaders"]["x-amz-bucket-arn"] == f"arn:aws:s3:::{bucket_name}"
    put = client.put_object(Bucket=bucket_name, Key="obj", Body=b"12345")
    assert put["ResponseMetadata"]["HTTPHeaders"]["x-amz-object-size"] == "5"
