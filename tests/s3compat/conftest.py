# pytest wiring of the S3 compatibility suite: refuses to start without a configured gateway, and
# removes every bucket a test created (objects, uploads and all) after it, as ceph/s3-tests'
# teardown does, so tests stay independent and a run leaves the gateway as it found it.

import pytest

import s3support


def pytest_configure(config):
    config.addinivalue_line("markers", "lowtail: a case written for lowtail, not ported from ceph/s3-tests")


def pytest_sessionstart(session):
    try:
        s3support.settings()
    except RuntimeError as e:
        raise pytest.UsageError(str(e))


@pytest.fixture(autouse=True)
def _cleanup_buckets():
    yield
    client = s3support.get_client()
    for name in s3support.take_created_buckets():
        s3support.nuke_bucket(client, name)
