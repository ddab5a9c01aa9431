# Features lowtail does not have (ACL grants, object lock and legal hold, server-side encryption,
# storage classes other than STANDARD) are refused with the error AWS gives a bucket without them, and
# nothing is stored; what lowtail does do (an owner-only canned ACL) passes. All cases are lowtail's own.

import datetime

import pytest
from botocore.exceptions import ClientError

from s3support import _get_status_and_error_code, assert_raises, get_client, get_new_bucket

RETAIN_UNTIL = datetime.datetime(2099, 1, 1, tzinfo=datetime.timezone.utc)

REFUSED_PUTS = [
    ({"ObjectLockMode": "COMPLIANCE", "ObjectLockRetainUntilDate": RETAIN_UNTIL}, 400, "InvalidRequest"),
    ({"ObjectLockLegalHoldStatus": "ON"}, 400, "InvalidRequest"),
    ({"ServerSideEncryption": "AES256"}, 501, "NotImplemented"),
    ({"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": "key"}, 501, "NotImplemented"),
    ({"ACL": "public-read"}, 400, "AccessControlListNotSupported"),
    ({"GrantRead": 'uri="http://acs.amazonaws.com/groups/global/AllUsers"'}, 400, "AccessControlListNotSupported"),
    ({"StorageClass": "GLACIER"}, 400, "InvalidStorageClass"),
]


@pytest.mark.lowtail
@pytest.mark.parametrize("extra,status,code", REFUSED_PUTS)
def test_put_object_unsupported_feature_refused(extra, status, code):
    # Before, each was accepted and ignored: a COMPLIANCE-locked object was then deleted by a DELETE.
    bucket_name = get_new_bucket()
    client = get_client()
    e = assert_raises(ClientError, client.put_object, Bucket=bucket_name, Key="locked", Body=b"x", **extra)
    assert _get_status_and_error_code(e.response) == (status, code)
    assert "Contents" not in client.list_objects(Bucket=bucket_name), "nothing was stored"


@pytest.mark.lowtail
@pytest.mark.parametrize("extra,status,code", REFUSED_PUTS)
def test_multipart_upload_unsupported_feature_refused(extra, status, code):
    bucket_name = get_new_bucket()
    client = get_client()
    e = assert_raises(ClientError, client.create_multipart_upload, Bucket=bucket_name, Key="locked", **extra)
    assert _get_status_and_error_code(e.response) == (status, code)
    assert client.list_multipart_uploads(Bucket=bucket_name).get("Uploads", []) == []


@pytest.mark.lowtail
def test_create_bucket_with_object_lock_refused():
    client = get_client()
    bucket_name = get_new_bucket()
    client.delete_bucket(Bucket=bucket_name)
    e = assert_raises(ClientError, client.create_bucket, Bucket=bucket_name, ObjectLockEnabledForBucket=True)
    assert _get_status_and_error_code(e.response) == (501, "NotImplemented")
    e = assert_raises(ClientError, client.head_bucket, Bucket=bucket_name)
    assert _get_status_and_error_code(e.response)[0] == 404


@pytest.mark.lowtail
@pytest.mark.parametrize("acl", ["private", "bucket-owner-full-control"])
def test_owner_only_acl_accepted(acl):
    # Every object belongs to the bucket owner alone: these ACLs say exactly that (rclone sends
    # `x-amz-acl: private` by default).
    bucket_name = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket_name, Key="mine", Body=b"x", ACL=acl)
    assert client.get_object(Bucket=bucket_name, Key="mine")["Body"].read() == b"x"
