# The suite's connection to the gateway under test: configuration (environment or a `lowtail up`
# cluster.json), boto3 clients with good, bad and no credentials, unique bucket names, and the
# helpers ceph/s3-tests' test_s3.py uses (named as there, so ported cases read the same).
# Owns no test; conftest.py removes the buckets a test created.

import json
import os
import random
import string

# Pure-Python signing: botocore's CRT signer (used when python3-awscrt is installed) refuses to
# presign with the zero or negative expiry upstream's expiry cases need.
os.environ.setdefault("BOTO_DISABLE_CRT", "true")

import boto3  # noqa: E402
import botocore  # noqa: E402
from botocore import UNSIGNED  # noqa: E402
from botocore.config import Config  # noqa: E402

_config = None
# One botocore session for every client: it caches the parsed service model, which takes a good part
# of a second to load per new session.
_session = None
_created_buckets = []
_bucket_counter = [0]
# One prefix per run: buckets of concurrent or earlier runs never collide with ours.
_PREFIX = "s3compat-" + "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(8)) + "-"


class Settings:
    def __init__(self, endpoint, access_key, secret_key, region):
        self.endpoint = endpoint.rstrip("/")
        self.access_key = access_key
        self.secret_key = secret_key
        self.region = region


def _load():
    """Environment first (what the Rust harness sets), then cluster.json (what `lowtail up` writes)."""
    endpoint = os.environ.get("S3TEST_ENDPOINT")
    access_key = os.environ.get("S3TEST_ACCESS_KEY")
    secret_key = os.environ.get("S3TEST_SECRET_KEY")
    region = os.environ.get("S3TEST_REGION")
    if endpoint and access_key and secret_key:
        return Settings(endpoint, access_key, secret_key, region or "us-east-1")
    path = os.environ.get("S3TEST_CLUSTER", os.path.join("lowtail-data", "cluster.json"))
    if not os.path.exists(path):
        raise RuntimeError(
            "no gateway configured: set S3TEST_ENDPOINT, S3TEST_ACCESS_KEY and S3TEST_SECRET_KEY, "
            "or S3TEST_CLUSTER=DIR/cluster.json of a running `lowtail up --dir DIR` "
            f"(looked for {path})"
        )
    with open(path) as f:
        manifest = json.load(f)
    return Settings(
        endpoint or manifest["endpoint"],
        access_key or manifest["access_key"],
        secret_key or manifest["secret_key"],
        region or manifest.get("region") or "us-east-1",
    )


def settings():
    global _config
    if _config is None:
        _config = _load()
    return _config


def _client_config(signature_version=None):
    return Config(
        s3={"addressing_style": "path"},
        # One attempt: an error must show up as the error, not be retried away.
        retries={"total_max_attempts": 1, "mode": "standard"},
        # SigV4 everywhere, as upstream's get_client; older botocore presigns with SigV2 otherwise.
        signature_version=signature_version or "s3v4",
        connect_timeout=10,
        read_timeout=120,
    )


def _boto_session():
    global _session
    if _session is None:
        _session = boto3.session.Session()
    return _session


def _make_client(access_key, secret_key, signature_version=None):
    s = settings()
    return _boto_session().client(
        "s3",
        endpoint_url=s.endpoint,
        aws_access_key_id=access_key,
        aws_secret_access_key=secret_key,
        region_name=s.region,
        config=_client_config(signature_version),
    )


def botocore_at_least(major, minor):
    """Whether the installed botocore is at least major.minor (newer S3 parameters and defaults)."""
    return tuple(int(x) for x in botocore.__version__.split(".")[:2]) >= (major, minor)


def signed_raw(method, path, body, headers):
    """A request signed with SigV4 headers as given (x-amz-content-sha256 included), sent as is:
    for bodies botocore would not send (aws-chunked over plain HTTP, malformed XML)."""
    import urllib3
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    s = settings()
    request = AWSRequest(method=method, url=f"{s.endpoint}{path}", data=body, headers=headers)
    SigV4Auth(Credentials(s.access_key, s.secret_key), "s3", s.region).add_auth(request)
    prepared = request.prepare()
    return urllib3.PoolManager(retries=False).request(method, prepared.url, body=body, headers=dict(prepared.headers))


def get_client():
    s = settings()
    return _make_client(s.access_key, s.secret_key)


def get_unauthenticated_client():
    s = settings()
    return _make_client("", "", signature_version=UNSIGNED)


def get_bad_auth_client(aws_access_key_id="badauth"):
    # The secret upstream uses for its bad-auth client.
    return _make_client(aws_access_key_id, "roflmao")


def get_main_aws_access_key():
    return settings().access_key


def get_config_endpoint():
    return settings().endpoint


def get_prefix():
    return _PREFIX


def get_new_bucket_name():
    """A fresh, valid bucket name under this run's prefix, remembered for cleanup."""
    _bucket_counter[0] += 1
    name = f"{_PREFIX}{_bucket_counter[0]}"
    _created_buckets.append(name)
    return name


def remember_bucket(name):
    """Registers a bucket created under a name not from get_new_bucket_name (for cleanup)."""
    _created_buckets.append(name)


def get_new_bucket(client=None, name=None):
    if client is None:
        client = get_client()
    if name is None:
        name = get_new_bucket_name()
    else:
        remember_bucket(name)
    client.create_bucket(Bucket=name)
    return name


def get_new_bucket_resource(name=None):
    s = settings()
    resource = _boto_session().resource(
        "s3",
        endpoint_url=s.endpoint,
        aws_access_key_id=s.access_key,
        aws_secret_access_key=s.secret_key,
        region_name=s.region,
        config=_client_config(),
    )
    bucket = resource.Bucket(name or get_new_bucket_name())
    if name is not None:
        remember_bucket(name)
    bucket.create()
    return bucket


def take_created_buckets():
    taken = list(dict.fromkeys(_created_buckets))
    _created_buckets.clear()
    return taken


def nuke_bucket(client, name):
    """Aborts uploads, deletes objects, deletes the bucket; a bucket that is gone is fine."""
    try:
        while True:
            uploads = client.list_multipart_uploads(Bucket=name).get("Uploads", [])
            for upload in uploads:
                client.abort_multipart_upload(Bucket=name, Key=upload["Key"], UploadId=upload["UploadId"])
            if not uploads:
                break
        while True:
            objects = client.list_objects_v2(Bucket=name).get("Contents", [])
            if not objects:
                break
            client.delete_objects(Bucket=name, Delete={"Objects": [{"Key": o["Key"]} for o in objects], "Quiet": True})
        client.delete_bucket(Bucket=name)
    except botocore.exceptions.ClientError as e:
        if e.response["Error"]["Code"] != "NoSuchBucket":
            raise


def assert_raises(exception, fn, *args, **kwargs):
    """Calls fn and returns the exception it raised; fails if it raised none (as upstream's utils)."""
    try:
        fn(*args, **kwargs)
    except exception as e:
        return e
    raise AssertionError(f"{fn.__name__} did not raise {exception.__name__}")


def _get_status_and_error_code(response):
    return response["ResponseMetadata"]["HTTPStatusCode"], response["Error"]["Code"]


def _get_status(response):
    return response["ResponseMetadata"]["HTTPStatusCode"]


def _get_body(response):
    got = response["Body"].read()
    if type(got) is bytes:
        got = got.decode()
    return got


def _create_objects(bucket=None, bucket_name=None, keys=()):
    """A (new) bucket holding one object per key, each object's body being its key."""
    client = get_client()
    if bucket_name is None:
        bucket_name = get_new_bucket()
    for key in keys:
        client.put_object(Bucket=bucket_name, Key=key, Body=key)
    return bucket_name


def _get_keys(response):
    return [obj["Key"] for obj in response.get("Contents", [])]


def _get_prefixes(response):
    return [prefix["Prefix"] for prefix in response.get("CommonPrefixes", [])]


def generate_random(size, part_size=5 * 1024 * 1024):
    """Yields `size` random ASCII characters in strings of at most part_size (as upstream's utils)."""
    chunk = 1024
    allowed = string.ascii_letters
    for x in range(0, size, part_size):
        this_part_size = min(size - x, part_size)
        strpart = "".join(random.choice(allowed) for _ in range(chunk))
        s = ""
        left = this_part_size
        while left > 0:
            n = min(left, chunk)
            s += strpart[:n]
            left -= n
        yield s
