#!/usr/bin/env python3
"""Read several objects in one request from lowtail: its batch read,
POST /{bucket}?lowtail-batch-get (docs/s3.md, "Batch reads").

    python3 examples/batch_get.py ENDPOINT ACCESS_KEY SECRET_KEY BUCKET KEY [KEY ...]

Prints one line per object (status, key, bytes, ETag) and exits 1 if any
object was not read. Needs botocore (Debian: python3-botocore), whose S3
signer signs the request as any S3 request is signed."""

import json
import sys
import urllib.parse
import urllib.request

from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials


def batch_get(endpoint, access_key, secret_key, bucket, keys, region="us-east-1"):
    """[(status, key, etag, bytes)] for `keys`, in their order."""
    body = json.dumps({"objects": [{"key": key} for key in keys]}).encode()
    url = f"{endpoint.rstrip('/')}/{bucket}?lowtail-batch-get"
    request = AWSRequest(method="POST", url=url, data=body, headers={"Content-Type": "application/json"})
    S3SigV4Auth(Credentials(access_key, secret_key), "s3", region).add_auth(request)
    sent = urllib.request.Request(url, data=body, headers=dict(request.headers), method="POST")
    with urllib.request.urlopen(sent) as answer:
        return parse(answer.read(), answer.headers.get_param("boundary"))


def parse(data, boundary):
    """The parts of a multipart/mixed answer, each cut by its Content-Length."""
    opening, closing = f"--{boundary}\r\n".encode(), f"--{boundary}--\r\n".encode()
    parts, at = [], 0
    while data[at:] != closing:
        if not data.startswith(opening, at):
            raise ValueError("a part does not start with the boundary")
        end = data.index(b"\r\n\r\n", at)
        lines = data[at + len(opening):end].decode().split("\r\n")
        headers = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines)}
        length = int(headers["content-length"])
        body = data[end + 4:end + 4 + length]
        key = urllib.parse.unquote(headers["x-lowtail-key"])
        parts.append((int(headers["x-lowtail-status"]), key, headers.get("etag"), body))
        at = end + 4 + length + 2
    return parts


if __name__ == "__main__":
    if len(sys.argv) < 6:
        sys.exit(__doc__)
    endpoint, access_key, secret_key, bucket, *keys = sys.argv[1:]
    failed = 0
    for status, key, etag, body in batch_get(endpoint, access_key, secret_key, bucket, keys):
        print(status, key, len(body), etag or "-")
        failed += status != 200
    sys.exit(1 if failed else 0)
