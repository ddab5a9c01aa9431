# S3's additional checksums (x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1, -sha256): checked on
# PutObject and UploadPart (a header, or a trailer of an aws-chunked body), a mismatch refused with
# BadDigest and nothing stored, the checksum returned by GET and HEAD with x-amz-checksum-mode:
# ENABLED, and a multipart object's checksum (COMPOSITE, FULL_OBJECT). All cases are lowtail's own
# (ceph/s3-tests has none); the expected codes and messages are AWS's.

import base64
import hashlib
import struct
import zlib

import botocore
import pytest
from botocore.exceptions import ClientError

import s3support
from s3support import _get_body, _get_keys, _get_status_and_error_code, assert_raises, get_client, get_new_bucket

pytestmark = pytest.mark.lowtail

MIB = 1024 * 1024


def _b64(digest):
    return base64.b64encode(digest).decode()


def _crc32(data):
    return struct.pack(">I", zlib.crc32(data))


def _reflected_crc(data, poly, width):
    # Bitwise, for the CRCs botocore computes only with awscrt installed (CRC32C, CRC64NVME).
    mask = (1 << width) - 1
    crc = mask
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
    return (crc ^ mask).to_bytes(width // 8, "big")


def _digest(algorithm, data):
    return {
        "CRC32": _crc32,
        "CRC32C": lambda d: _reflected_crc(d, 0x82F63B78, 32),
        "CRC64NVME": lambda d: _reflected_crc(d, 0x9A6C9329AC4BC9B5, 64),
        "SHA1": lambda d: hashlib.sha1(d).digest(),
        "SHA256": _sha256,
    }[algorithm](data)


def _response_header(response, name):
    # Read off the HTTP headers: older botocore does not parse the newer checksum fields.
    return response["ResponseMetadata"]["HTTPHeaders"].get(name)


needs_recent_boto3 = pytest.mark.skipif(
    not s3support.botocore_at_least(1, 36),
    reason=f"botocore {botocore.__version__} predates default checksums and x-amz-checksum-type (1.36); "
    "CI runs this suite with a recent boto3",
)


def _sha256(data):
    return hashlib.sha256(data).digest()


def _corrupt_body_after_checksum(client, operation):
    # The SDK has computed its checksum header when before-sign runs; flipping a byte of the body
    # here sends a body whose checksum is wrong but whose signature (computed next) is right.
    def corrupt(request, **kwargs):
        body = bytearray(request.body if isinstance(request.body, bytes) else request.body.read())
        body[0] ^= 0x01
        request.data = bytes(body)

    client.meta.events.register(f"before-sign.s3.{operation}", corrupt)


@needs_recent_boto3
def test_put_default_checksum_is_checked_and_returned():
    # boto3's default (CRC32 on every PutObject since 1.36) is stored and returned when asked.
    bucket = get_new_bucket()
    client = get_client()
    body = b"checksummed body" * 1000
    response = client.put_object(Bucket=bucket, Key="obj", Body=body)
    assert response["ChecksumCRC32"] == _b64(_crc32(body))
    got = client.get_object(Bucket=bucket, Key="obj", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32"] == _b64(_crc32(body))
    assert got["ChecksumType"] == "FULL_OBJECT"
    assert got["Body"].read() == body
    head = client.head_object(Bucket=bucket, Key="obj", ChecksumMode="ENABLED")
    assert head["ChecksumCRC32"] == _b64(_crc32(body))
    # Not asked for: not returned.
    assert "ChecksumCRC32" not in client.head_object(Bucket=bucket, Key="obj")


@pytest.mark.parametrize("algorithm", ["CRC32", "SHA256"])
def test_put_corrupted_body_is_refused_and_nothing_stored(algorithm):
    bucket = get_new_bucket()
    client = get_client()
    _corrupt_body_after_checksum(client, "PutObject")
    e = assert_raises(ClientError, client.put_object, Bucket=bucket, Key="obj", Body=b"x" * 4096, ChecksumAlgorithm=algorithm)
    status, code = _get_status_and_error_code(e.response)
    assert (status, code) == (400, "BadDigest")
    assert e.response["Error"]["Message"] == f"The {algorithm} you specified did not match the calculated checksum."
    assert _get_keys(get_client().list_objects(Bucket=bucket)) == []


def _put_with_header(bucket, headers, key="obj", body=b"hello"):
    client = get_client()

    def set_headers(request, **kwargs):
        for name in list(request.headers.keys()):
            if name.lower().startswith("x-amz-checksum-") or name.lower() == "x-amz-sdk-checksum-algorithm":
                del request.headers[name]
        for name, value in headers.items():
            request.headers[name] = value

    client.meta.events.register("before-sign.s3.PutObject", set_headers)
    return client.put_object(Bucket=bucket, Key=key, Body=body)


@pytest.mark.parametrize("algorithm", ["CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256"])
def test_put_each_algorithm_round_trips(algorithm):
    bucket = get_new_bucket()
    body = bytes(range(256)) * 20
    value = _b64(_digest(algorithm, body))
    header = f"x-amz-checksum-{algorithm.lower()}"
    _put_with_header(bucket, {header: value}, body=body)
    got = get_client().get_object(Bucket=bucket, Key="obj", ChecksumMode="ENABLED")
    assert _response_header(got, header) == value
    assert _response_header(got, "x-amz-checksum-type") == "FULL_OBJECT"
    wrong = _b64(_digest(algorithm, body + b"!"))
    e = assert_raises(ClientError, _put_with_header, bucket, {header: wrong}, key="wrong", body=body)
    assert _get_status_and_error_code(e.response) == (400, "BadDigest")


@pytest.mark.parametrize(
    "headers,code",
    [
        ({"x-amz-checksum-crc32": "not base64!"}, "InvalidRequest"),
        ({"x-amz-checksum-sha256": _b64(b"\0" * 4)}, "InvalidRequest"),
        ({"x-amz-checksum-crc32": _b64(_crc32(b"hello")), "x-amz-checksum-crc32c": _b64(b"\0" * 4)}, "InvalidRequest"),
        ({"x-amz-checksum-crc32": _b64(_crc32(b"hellp"))}, "BadDigest"),
    ],
)
def test_put_malformed_or_wrong_checksum_headers(headers, code):
    bucket = get_new_bucket()
    e = assert_raises(ClientError, _put_with_header, bucket, headers)
    assert _get_status_and_error_code(e.response) == (400, code)
    assert _get_keys(get_client().list_objects(Bucket=bucket)) == []


def test_put_without_checksum_gets_crc64nvme():
    # As S3 does since 2025: an object sent without a checksum gets a CRC64NVME one.
    bucket = get_new_bucket()
    client = get_client()

    def drop_checksums(request, **kwargs):
        for name in list(request.headers.keys()):
            if name.lower().startswith("x-amz-checksum-") or name.lower() == "x-amz-sdk-checksum-algorithm":
                del request.headers[name]

    client.meta.events.register("before-sign.s3.PutObject", drop_checksums)
    client.put_object(Bucket=bucket, Key="obj", Body=b"123456789")
    got = get_client().head_object(Bucket=bucket, Key="obj", ChecksumMode="ENABLED")
    # The CRC-64/NVME check value of "123456789".
    assert _response_header(got, "x-amz-checksum-crc64nvme") == _b64(struct.pack(">Q", 0xAE8B14860A799888))


def _chunked_trailer_put(bucket, key, body, trailer_value):
    # An aws-chunked body with its checksum in a trailer (STREAMING-UNSIGNED-PAYLOAD-TRAILER), as
    # SDKs send over HTTPS; built by hand because botocore uses it only over TLS.
    payload = b"%x\r\n" % len(body) + body + b"\r\n0\r\n" + b"x-amz-checksum-crc32:" + trailer_value.encode() + b"\r\n\r\n"
    headers = {
        "Content-Encoding": "aws-chunked",
        "x-amz-content-sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER",
        "x-amz-decoded-content-length": str(len(body)),
        "x-amz-trailer": "x-amz-checksum-crc32",
        "x-amz-sdk-checksum-algorithm": "CRC32",
        "Content-Length": str(len(payload)),
    }
    return s3support.signed_raw("PUT", f"/{bucket}/{key}", payload, headers)


def test_put_trailer_checksum_is_checked():
    bucket = get_new_bucket()
    body = b"trailer body " * 100
    good = _chunked_trailer_put(bucket, "good", body, _b64(_crc32(body)))
    assert good.status == 200, good.data
    bad = _chunked_trailer_put(bucket, "bad", body, _b64(_crc32(body + b"!")))
    assert bad.status == 400 and b"<Code>BadDigest</Code>" in bad.data, bad.data
    client = get_client()
    assert _get_keys(client.list_objects(Bucket=bucket)) == ["good"]
    got = client.get_object(Bucket=bucket, Key="good", ChecksumMode="ENABLED")
    assert got["ChecksumCRC32"] == _b64(_crc32(body))
    assert _get_body(got) == body.decode()
    # aws-chunked described how the body was sent, not the object.
    assert "ContentEncoding" not in got


def _multipart(client, bucket, key, parts, **create):
    upload = client.create_multipart_upload(Bucket=bucket, Key=key, **create)
    done = []
    for number, data in enumerate(parts, start=1):
        kwargs = {"ChecksumAlgorithm": create["ChecksumAlgorithm"]} if "ChecksumAlgorithm" in create else {}
        response = client.upload_part(
            Bucket=bucket, Key=key, UploadId=upload["UploadId"], PartNumber=number, Body=data, **kwargs
        )
        entry = {"PartNumber": number, "ETag": response["ETag"]}
        for field in ("ChecksumCRC32", "ChecksumCRC32C", "ChecksumCRC64NVME", "ChecksumSHA1", "ChecksumSHA256"):
            if field in response:
                entry[field] = response[field]
        done.append(entry)
    return upload["UploadId"], done


def _complete_error(client, bucket, upload_id, parts, **extra):
    # The (status, code) of a CompleteMultipartUpload of key "mp" that must fail.
    e = assert_raises(
        ClientError,
        client.complete_multipart_upload,
        Bucket=bucket,
        Key="mp",
        UploadId=upload_id,
        MultipartUpload={"Parts": parts},
        **extra,
    )
    return _get_status_and_error_code(e.response)


def test_multipart_composite_checksum():
    bucket = get_new_bucket()
    client = get_client()
    parts = [b"a" * (5 * MIB), b"b" * 1000]
    upload_id, done = _multipart(client, bucket, "mp", parts, ChecksumAlgorithm="SHA256")
    listed = client.list_parts(Bucket=bucket, Key="mp", UploadId=upload_id)
    assert listed["ChecksumAlgorithm"] == "SHA256"
    assert [p["ChecksumSHA256"] for p in listed["Parts"]] == [_b64(_sha256(p)) for p in parts]
    complete = client.complete_multipart_upload(
        Bucket=bucket, Key="mp", UploadId=upload_id, MultipartUpload={"Parts": done}
    )
    expected = _b64(_sha256(b"".join(_sha256(p) for p in parts))) + "-2"
    assert complete["ChecksumSHA256"] == expected
    head = client.head_object(Bucket=bucket, Key="mp", ChecksumMode="ENABLED")
    assert (head["ChecksumSHA256"], _response_header(head, "x-amz-checksum-type")) == (expected, "COMPOSITE")


@needs_recent_boto3
def test_multipart_full_object_crc32_is_combined_and_checked():
    bucket = get_new_bucket()
    client = get_client()
    parts = [b"x" * (5 * MIB), b"y" * 12345]
    whole = b"".join(parts)
    upload_id, done = _multipart(
        client, bucket, "mp", parts, ChecksumAlgorithm="CRC32", ChecksumType="FULL_OBJECT"
    )
    wrong = _complete_error(
        client, bucket, upload_id, done, ChecksumCRC32=_b64(_crc32(whole + b"!")), ChecksumType="FULL_OBJECT"
    )
    assert wrong == (400, "BadDigest")
    complete = client.complete_multipart_upload(
        Bucket=bucket,
        Key="mp",
        UploadId=upload_id,
        MultipartUpload={"Parts": done},
        ChecksumCRC32=_b64(_crc32(whole)),
        ChecksumType="FULL_OBJECT",
    )
    assert complete["ChecksumCRC32"] == _b64(_crc32(whole))
    got = client.get_object(Bucket=bucket, Key="mp", ChecksumMode="ENABLED")
    assert (got["ChecksumCRC32"], got["ChecksumType"]) == (_b64(_crc32(whole)), "FULL_OBJECT")


def test_multipart_composite_completion_must_name_part_checksums():
    bucket = get_new_bucket()
    client = get_client()
    upload_id, done = _multipart(client, bucket, "mp", [b"z" * 100], ChecksumAlgorithm="CRC32")
    without = [{"PartNumber": p["PartNumber"], "ETag": p["ETag"]} for p in done]
    wrong = [dict(p, ChecksumCRC32=_b64(_crc32(b"other"))) for p in done]
    for parts, code in [(without, "InvalidRequest"), (wrong, "InvalidPart")]:
        assert _complete_error(client, bucket, upload_id, parts) == (400, code)


def test_multipart_part_of_another_algorithm_is_refused():
    bucket = get_new_bucket()
    client = get_client()
    upload = client.create_multipart_upload(Bucket=bucket, Key="mp", ChecksumAlgorithm="CRC32")
    e = assert_raises(
        ClientError,
        client.upload_part,
        Bucket=bucket,
        Key="mp",
        UploadId=upload["UploadId"],
        PartNumber=1,
        Body=b"part",
        ChecksumAlgorithm="SHA256",
    )
    assert _get_status_and_error_code(e.response) == (400, "InvalidRequest")


def test_multipart_part_corrupted_body_is_refused():
    bucket = get_new_bucket()
    client = get_client()
    upload = client.create_multipart_upload(Bucket=bucket, Key="mp", ChecksumAlgorithm="CRC32")
    _corrupt_body_after_checksum(client, "UploadPart")
    e = assert_raises(
        ClientError,
        client.upload_part,
        Bucket=bucket,
        Key="mp",
        UploadId=upload["UploadId"],
        PartNumber=1,
        Body=b"p" * 1000,
        ChecksumAlgorithm="CRC32",
    )
    assert _get_status_and_error_code(e.response) == (400, "BadDigest")
    assert get_client().list_parts(Bucket=bucket, Key="mp", UploadId=upload["UploadId"]).get("Parts", []) == []


@needs_recent_boto3
@pytest.mark.parametrize(
    "algorithm,kind",
    [("SHA1", "FULL_OBJECT"), ("CRC64NVME", "COMPOSITE")],
)
def test_multipart_checksum_type_the_algorithm_cannot_have(algorithm, kind):
    bucket = get_new_bucket()
    client = get_client()
    e = assert_raises(
        ClientError, client.create_multipart_upload, Bucket=bucket, Key="mp", ChecksumAlgorithm=algorithm, ChecksumType=kind
    )
    assert _get_status_and_error_code(e.response) == (400, "InvalidRequest")


def test_copy_keeps_the_checksum():
    bucket = get_new_bucket()
    client = get_client()
    body = b"copy me" * 100
    client.put_object(Bucket=bucket, Key="src", Body=body, ChecksumAlgorithm="SHA256")
    copy = client.copy_object(Bucket=bucket, Key="dst", CopySource={"Bucket": bucket, "Key": "src"})
    assert copy["CopyObjectResult"]["ChecksumSHA256"] == _b64(_sha256(body))
    got = client.head_object(Bucket=bucket, Key="dst", ChecksumMode="ENABLED")
    assert got["ChecksumSHA256"] == _b64(_sha256(body))


def test_multi_delete_checksum_is_checked():
    # boto3 sends DeleteObjects with x-amz-checksum-crc32 instead of Content-MD5; a wrong one
    # deletes nothing.
    bucket = get_new_bucket()
    client = get_client()
    client.put_object(Bucket=bucket, Key="a", Body=b"a")

    def wrong(request, **kwargs):
        for name in list(request.headers.keys()):
            if name.lower().startswith("x-amz-checksum-") or name.lower() == "content-md5":
                del request.headers[name]
        request.headers["x-amz-checksum-crc32"] = _b64(_crc32(b"not the body"))

    client.meta.events.register("before-sign.s3.DeleteObjects", wrong)
    e = assert_raises(ClientError, client.delete_objects, Bucket=bucket, Delete={"Objects": [{"Key": "a"}]})
    assert _get_status_and_error_code(e.response) == (400, "BadDigest")
    assert _get_keys(get_client().list_objects(Bucket=bucket)) == ["a"]
    deleted = get_client().delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "a"}]})
    assert [d["Key"] for d in deleted["Deleted"]] == ["a"]
