# Listings: ListObjects v1 (prefix, delimiter, common prefixes, marker, max-keys, IsTruncated,
# NextMarker, encoding-type=url) and v2 (continuation token, start-after, KeyCount, fetch-owner),
# and ListObjectVersions on an unversioned bucket. Ported from ceph/s3-tests
# s3tests_boto3/functional/test_s3.py (same test names; cases marked `lowtail` are this project's
# own). Assertions are upstream's unless a comment says why not.

import pytest
from botocore.exceptions import ClientError

from s3support import (
    _create_objects,
    _get_keys,
    _get_prefixes,
    _get_status_and_error_code,
    assert_raises,
    get_client,
    get_new_bucket,
)


def test_bucket_list_many():
    bucket_name = _create_objects(keys=["foo", "bar", "baz"])
    client = get_client()
    response = client.list_objects(Bucket=bucket_name, MaxKeys=2)
    keys = _get_keys(response)
    assert len(keys) == 2
    assert keys == ["bar", "baz"]
    assert response["IsTruncated"] is True
    response = client.list_objects(Bucket=bucket_name, Marker="baz", MaxKeys=2)
    keys = _get_keys(response)
    assert len(keys) == 1
    assert response["IsTruncated"] is False
    assert keys == ["foo"]


def test_bucket_listv2_many():
    bucket_name = _create_objects(keys=["foo", "bar", "baz"])
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name, MaxKeys=2)
    keys = _get_keys(response)
    assert len(keys) == 2
    assert keys == ["bar", "baz"]
    assert response["IsTruncated"] is True
    response = client.list_objects_v2(Bucket=bucket_name, StartAfter="baz", MaxKeys=2)
    keys = _get_keys(response)
    assert len(keys) == 1
    assert response["IsTruncated"] is False
    assert keys == ["foo"]


def test_basic_key_count():
    client = get_client()
    bucket_name = get_new_bucket()
    for j in range(5):
        client.put_object(Bucket=bucket_name, Key=str(j))
    response1 = client.list_objects_v2(Bucket=bucket_name)
    assert response1["KeyCount"] == 5


def test_bucket_list_delimiter_basic():
    bucket_name = _create_objects(keys=["foo/bar", "foo/bar/xyzzy", "quux/thud", "asdf"])
    client = get_client()
    response = client.list_objects(Bucket=bucket_name, Delimiter="/")
    assert response["Delimiter"] == "/"
    assert _get_keys(response) == ["asdf"]
    prefixes = _get_prefixes(response)
    assert len(prefixes) == 2
    assert prefixes == ["foo/", "quux/"]


def test_bucket_listv2_delimiter_basic():
    bucket_name = _create_objects(keys=["foo/bar", "foo/bar/xyzzy", "quux/thud", "asdf"])
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name, Delimiter="/")
    assert response["Delimiter"] == "/"
    keys = _get_keys(response)
    assert keys == ["asdf"]
    prefixes = _get_prefixes(response)
    assert len(prefixes) == 2
    assert prefixes == ["foo/", "quux/"]
    assert response["KeyCount"] == len(prefixes) + len(keys)


def test_bucket_listv2_encoding_basic():
    bucket_name = _create_objects(keys=["foo+1/bar", "foo/bar/xyzzy", "quux ab/thud", "asdf+b"])
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name, Delimiter="/", EncodingType="url")
    assert response["Delimiter"] == "/"
    assert _get_keys(response) == ["asdf%2Bb"]
    prefixes = _get_prefixes(response)
    assert len(prefixes) == 3
    assert prefixes == ["foo%2B1/", "foo/", "quux%20ab/"]


def test_bucket_list_encoding_basic():
    bucket_name = _create_objects(keys=["foo+1/bar", "foo/bar/xyzzy", "quux ab/thud", "asdf+b"])
    client = get_client()
    response = client.list_objects(Bucket=bucket_name, Delimiter="/", EncodingType="url")
    assert response["Delimiter"] == "/"
    assert _get_keys(response) == ["asdf%2Bb"]
    prefixes = _get_prefixes(response)
    assert len(prefixes) == 3
    assert prefixes == ["foo%2B1/", "foo/", "quux%20ab/"]


def validate_bucket_list(bucket_name, prefix, delimiter, marker, max_keys, is_truncated, check_objs, check_prefixes, next_marker):
    client = get_client()
    response = client.list_objects(Bucket=bucket_name, Delimiter=delimiter, Marker=marker, MaxKeys=max_keys, Prefix=prefix)
    assert response["IsTruncated"] == is_truncated
    assert response.get("NextMarker") == next_marker
    keys = _get_keys(response)
    prefixes = _get_prefixes(response)
    assert len(keys) == len(check_objs)
    assert len(prefixes) == len(check_prefixes)
    assert keys == check_objs
    assert prefixes == check_prefixes
    return response.get("NextMarker")


def validate_bucket_listv2(bucket_name, prefix, delimiter, continuation_token, max_keys, is_truncated, check_objs, check_prefixes, last=False):
    client = get_client()
    params = dict(Bucket=bucket_name, Delimiter=delimiter, MaxKeys=max_keys, Prefix=prefix)
    if continuation_token is not None:
        params["ContinuationToken"] = continuation_token
    else:
        params["StartAfter"] = ""
    response = client.list_objects_v2(**params)
    assert response["IsTruncated"] == is_truncated
    if last:
        assert response.get("NextContinuationToken") is None
    keys = _get_keys(response)
    prefixes = _get_prefixes(response)
    assert len(keys) == len(check_objs)
    assert len(prefixes) == len(check_prefixes)
    assert keys == check_objs
    assert prefixes == check_prefixes
    return response.get("NextContinuationToken")


def test_bucket_list_delimiter_prefix():
    bucket_name = _create_objects(keys=["asdf", "boo/bar", "boo/baz/xyzzy", "cquux/thud", "cquux/bla"])
    delim = "/"
    prefix = ""
    marker = validate_bucket_list(bucket_name, prefix, delim, "", 1, True, ["asdf"], [], "asdf")
    marker = validate_bucket_list(bucket_name, prefix, delim, marker, 1, True, [], ["boo/"], "boo/")
    marker = validate_bucket_list(bucket_name, prefix, delim, marker, 1, False, [], ["cquux/"], None)
    marker = validate_bucket_list(bucket_name, prefix, delim, "", 2, True, ["asdf"], ["boo/"], "boo/")
    marker = validate_bucket_list(bucket_name, prefix, delim, marker, 2, False, [], ["cquux/"], None)
    prefix = "boo/"
    marker = validate_bucket_list(bucket_name, prefix, delim, "", 1, True, ["boo/bar"], [], "boo/bar")
    marker = validate_bucket_list(bucket_name, prefix, delim, marker, 1, False, [], ["boo/baz/"], None)
    validate_bucket_list(bucket_name, prefix, delim, "", 2, False, ["boo/bar"], ["boo/baz/"], None)


def test_bucket_listv2_delimiter_prefix():
    bucket_name = _create_objects(keys=["asdf", "boo/bar", "boo/baz/xyzzy", "cquux/thud", "cquux/bla"])
    delim = "/"
    prefix = ""
    token = validate_bucket_listv2(bucket_name, prefix, delim, None, 1, True, ["asdf"], [])
    token = validate_bucket_listv2(bucket_name, prefix, delim, token, 1, True, [], ["boo/"])
    validate_bucket_listv2(bucket_name, prefix, delim, token, 1, False, [], ["cquux/"], last=True)
    token = validate_bucket_listv2(bucket_name, prefix, delim, None, 2, True, ["asdf"], ["boo/"])
    validate_bucket_listv2(bucket_name, prefix, delim, token, 2, False, [], ["cquux/"], last=True)
    prefix = "boo/"
    token = validate_bucket_listv2(bucket_name, prefix, delim, None, 1, True, ["boo/bar"], [])
    validate_bucket_listv2(bucket_name, prefix, delim, token, 1, False, [], ["boo/baz/"], last=True)
    validate_bucket_listv2(bucket_name, prefix, delim, None, 2, False, ["boo/bar"], ["boo/baz/"], last=True)


def test_bucket_listv2_delimiter_prefix_ends_with_delimiter():
    bucket_name = _create_objects(keys=["asdf/"])
    validate_bucket_listv2(bucket_name, "asdf/", "/", None, 1000, False, ["asdf/"], [], last=True)


def test_bucket_list_delimiter_prefix_ends_with_delimiter():
    bucket_name = _create_objects(keys=["asdf/"])
    validate_bucket_list(bucket_name, "asdf/", "/", "", 1000, False, ["asdf/"], [], None)


def test_bucket_list_delimiter_prefix_underscore():
    bucket_name = _create_objects(keys=["_obj1_", "_under1/bar", "_under1/baz/xyzzy", "_under2/thud", "_under2/bla"])
    delim = "/"
    prefix = ""
    marker = validate_bucket_list(bucket_name, prefix, delim, "", 1, True, ["_obj1_"], [], "_obj1_")
    marker = validate_bucket_list(bucket_name, prefix, delim, marker, 1, True, [], ["_under1/"], "_under1/")
    validate_bucket_list(bucket_name, prefix, delim, marker, 1, False, [], ["_under2/"], None)
    marker = validate_bucket_list(bucket_name, prefix, delim, "", 2, True, ["_obj1_"], ["_under1/"], "_under1/")
    validate_bucket_list(bucket_name, prefix, delim, marker, 2, False, [], ["_under2/"], None)
    prefix = "_under1/"
    marker = validate_bucket_list(bucket_name, prefix, delim, "", 1, True, ["_under1/bar"], [], "_under1/bar")
    validate_bucket_list(bucket_name, prefix, delim, marker, 1, False, [], ["_under1/baz/"], None)
    validate_bucket_list(bucket_name, prefix, delim, "", 2, False, ["_under1/bar"], ["_under1/baz/"], None)


def test_bucket_listv2_delimiter_prefix_underscore():
    bucket_name = _create_objects(keys=["_obj1_", "_under1/bar", "_under1/baz/xyzzy", "_under2/thud", "_under2/bla"])
    delim = "/"
    prefix = ""
    token = validate_bucket_listv2(bucket_name, prefix, delim, None, 1, True, ["_obj1_"], [])
    token = validate_bucket_listv2(bucket_name, prefix, delim, token, 1, True, [], ["_under1/"])
    validate_bucket_listv2(bucket_name, prefix, delim, token, 1, False, [], ["_under2/"], last=True)
    token = validate_bucket_listv2(bucket_name, prefix, delim, None, 2, True, ["_obj1_"], ["_under1/"])
    validate_bucket_listv2(bucket_name, prefix, delim, token, 2, False, [], ["_under2/"], last=True)
    prefix = "_under1/"
    token = validate_bucket_listv2(bucket_name, prefix, delim, None, 1, True, ["_under1/bar"], [])
    validate_bucket_listv2(bucket_name, prefix, delim, token, 1, False, [], ["_under1/baz/"], last=True)
    validate_bucket_listv2(bucket_name, prefix, delim, None, 2, False, ["_under1/bar"], ["_under1/baz/"], last=True)


# Non-slash delimiters: upstream's _alt, _percentage, _whitespace and _dot cases, v1 and v2, which
# all split the same four keys the same way.
DELIMITER_CASES = [
    ("alt", "a", ["bar", "baz", "cab", "foo"], ["ba", "ca"]),
    ("percentage", "%", ["b%ar", "b%az", "c%ab", "foo"], ["b%", "c%"]),
    ("whitespace", " ", ["b ar", "b az", "c ab", "foo"], ["b ", "c "]),
    ("dot", ".", ["b.ar", "b.az", "c.ab", "foo"], ["b.", "c."]),
]


@pytest.mark.parametrize("version", ["list", "listv2"])
@pytest.mark.parametrize("name,delimiter,key_names,expected_prefixes", DELIMITER_CASES, ids=[c[0] for c in DELIMITER_CASES])
def test_bucket_list_delimiter_chars(version, name, delimiter, key_names, expected_prefixes):
    # Upstream's test_bucket_{list,listv2}_delimiter_{alt,percentage,whitespace,dot}.
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    lister = client.list_objects if version == "list" else client.list_objects_v2
    response = lister(Bucket=bucket_name, Delimiter=delimiter)
    assert response["Delimiter"] == delimiter
    # foo contains no delimiter and so is a complete key
    assert _get_keys(response) == ["foo"]
    prefixes = _get_prefixes(response)
    assert len(prefixes) == 2
    assert prefixes == expected_prefixes


@pytest.mark.parametrize("version", ["list", "listv2"])
def test_bucket_list_delimiter_unreadable(version):
    key_names = ["bar", "baz", "cab", "foo"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    lister = client.list_objects if version == "list" else client.list_objects_v2
    response = lister(Bucket=bucket_name, Delimiter="\x0a")
    assert response["Delimiter"] == "\x0a"
    assert _get_keys(response) == key_names
    assert _get_prefixes(response) == []


@pytest.mark.parametrize("version", ["list", "listv2"])
def test_bucket_list_delimiter_empty(version):
    key_names = ["bar", "baz", "cab", "foo"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    lister = client.list_objects if version == "list" else client.list_objects_v2
    response = lister(Bucket=bucket_name, Delimiter="")
    # putting an empty value into Delimiter will not return a value in the response
    assert "Delimiter" not in response
    assert _get_keys(response) == key_names
    assert _get_prefixes(response) == []


@pytest.mark.parametrize("version", ["list", "listv2"])
def test_bucket_list_delimiter_none(version):
    key_names = ["bar", "baz", "cab", "foo"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    lister = client.list_objects if version == "list" else client.list_objects_v2
    response = lister(Bucket=bucket_name)
    assert "Delimiter" not in response
    assert _get_keys(response) == key_names
    assert _get_prefixes(response) == []


@pytest.mark.parametrize("version", ["list", "listv2"])
def test_bucket_list_delimiter_not_exist(version):
    key_names = ["bar", "baz", "cab", "foo"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    lister = client.list_objects if version == "list" else client.list_objects_v2
    response = lister(Bucket=bucket_name, Delimiter="/")
    assert response["Delimiter"] == "/"
    assert _get_keys(response) == key_names
    assert _get_prefixes(response) == []


def test_bucket_listv2_fetchowner_notempty():
    bucket_name = _create_objects(keys=["foo/bar", "foo/baz", "quux"])
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name, FetchOwner=True)
    assert "Owner" in response["Contents"][0]


def test_bucket_listv2_fetchowner_defaultempty():
    bucket_name = _create_objects(keys=["foo/bar", "foo/baz", "quux"])
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name)
    assert "Owner" not in response["Contents"][0]


def test_bucket_listv2_fetchowner_empty():
    bucket_name = _create_objects(keys=["foo/bar", "foo/baz", "quux"])
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name, FetchOwner=False)
    assert "Owner" not in response["Contents"][0]


def test_bucket_list_delimiter_not_skip_special():
    key_names = ["0/"] + ["0/%s" % i for i in range(1000, 1999)]
    key_names2 = ["1999", "1999#", "1999+", "2000"]
    key_names += key_names2
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.list_objects(Bucket=bucket_name, Delimiter="/")
    assert response["Delimiter"] == "/"
    assert _get_keys(response) == key_names2
    assert _get_prefixes(response) == ["0/"]


# Prefix cases, v1 and v2: (name, keys, prefix, delimiter or None, expected keys, expected prefixes).
PREFIX_CASES = [
    ("prefix_basic", ["foo/bar", "foo/baz", "quux"], "foo/", None, ["foo/bar", "foo/baz"], []),
    ("prefix_alt", ["bar", "baz", "foo"], "ba", None, ["bar", "baz"], []),
    ("prefix_empty", ["foo/bar", "foo/baz", "quux"], "", None, ["foo/bar", "foo/baz", "quux"], []),
    ("prefix_not_exist", ["foo/bar", "foo/baz", "quux"], "d", None, [], []),
    ("prefix_unreadable", ["foo/bar", "foo/baz", "quux"], "\x0a", None, [], []),
    ("prefix_delimiter_basic", ["foo/bar", "foo/baz/xyzzy", "quux/thud", "asdf"], "foo/", "/", ["foo/bar"], ["foo/baz/"]),
    ("prefix_delimiter_alt", ["bar", "bazar", "cab", "foo"], "ba", "a", ["bar"], ["baza"]),
    ("prefix_delimiter_prefix_not_exist", ["b/a/r", "b/a/c", "b/a/g", "g"], "/", "d", [], []),
    ("prefix_delimiter_delimiter_not_exist", ["b/a/c", "b/a/g", "b/a/r", "g"], "b", "z", ["b/a/c", "b/a/g", "b/a/r"], []),
    ("prefix_delimiter_prefix_delimiter_not_exist", ["b/a/c", "b/a/g", "b/a/r", "g"], "y", "z", [], []),
]


@pytest.mark.parametrize("version", ["list", "listv2"])
@pytest.mark.parametrize("name,key_names,prefix,delimiter,expected_keys,expected_prefixes", PREFIX_CASES, ids=[c[0] for c in PREFIX_CASES])
def test_bucket_list_prefix(version, name, key_names, prefix, delimiter, expected_keys, expected_prefixes):
    # Upstream's test_bucket_{list,listv2}_<name>.
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    lister = client.list_objects if version == "list" else client.list_objects_v2
    params = dict(Bucket=bucket_name, Prefix=prefix)
    if delimiter is not None:
        params["Delimiter"] = delimiter
    response = lister(**params)
    assert response["Prefix"] == prefix
    if delimiter is not None:
        assert response["Delimiter"] == delimiter
    assert _get_keys(response) == expected_keys
    assert _get_prefixes(response) == expected_prefixes


def test_bucket_list_maxkeys_one():
    key_names = ["bar", "baz", "foo", "quxx"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.list_objects(Bucket=bucket_name, MaxKeys=1)
    assert response["IsTruncated"] is True
    assert _get_keys(response) == key_names[0:1]
    response = client.list_objects(Bucket=bucket_name, Marker=key_names[0])
    assert response["IsTruncated"] is False
    assert _get_keys(response) == key_names[1:]


def test_bucket_listv2_maxkeys_one():
    key_names = ["bar", "baz", "foo", "quxx"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name, MaxKeys=1)
    assert response["IsTruncated"] is True
    assert _get_keys(response) == key_names[0:1]
    response = client.list_objects_v2(Bucket=bucket_name, StartAfter=key_names[0])
    assert response["IsTruncated"] is False
    assert _get_keys(response) == key_names[1:]


@pytest.mark.parametrize("version", ["list", "listv2"])
def test_bucket_list_maxkeys_zero(version):
    key_names = ["bar", "baz", "foo", "quxx"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    lister = client.list_objects if version == "list" else client.list_objects_v2
    response = lister(Bucket=bucket_name, MaxKeys=0)
    assert response["IsTruncated"] is False
    assert _get_keys(response) == []


@pytest.mark.parametrize("version", ["list", "listv2"])
def test_bucket_list_maxkeys_none(version):
    key_names = ["bar", "baz", "foo", "quxx"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    lister = client.list_objects if version == "list" else client.list_objects_v2
    response = lister(Bucket=bucket_name)
    assert response["IsTruncated"] is False
    assert _get_keys(response) == key_names
    assert response["MaxKeys"] == 1000


def test_bucket_list_maxkeys_invalid():
    key_names = ["bar", "baz", "foo", "quxx"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()

    def add_invalid_maxkeys(**kwargs):
        kwargs["params"]["url"] += "&max-keys=blah"

    client.meta.events.register("before-call.s3.ListObjects", add_invalid_maxkeys)
    e = assert_raises(ClientError, client.list_objects, Bucket=bucket_name)
    status, error_code = _get_status_and_error_code(e.response)
    assert status == 400
    assert error_code == "InvalidArgument"


def test_bucket_list_marker_none():
    bucket_name = _create_objects(keys=["bar", "baz", "foo", "quxx"])
    client = get_client()
    response = client.list_objects(Bucket=bucket_name)
    assert response["Marker"] == ""


def test_bucket_list_marker_empty():
    key_names = ["bar", "baz", "foo", "quxx"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.list_objects(Bucket=bucket_name, Marker="")
    assert response["Marker"] == ""
    assert response["IsTruncated"] is False
    assert _get_keys(response) == key_names


def test_bucket_listv2_continuationtoken_empty():
    key_names = ["bar", "baz", "foo", "quxx"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name, ContinuationToken="")
    assert response["ContinuationToken"] == ""
    assert response["IsTruncated"] is False
    assert _get_keys(response) == key_names


def test_bucket_listv2_continuationtoken():
    key_names = ["bar", "baz", "foo", "quxx"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response1 = client.list_objects_v2(Bucket=bucket_name, MaxKeys=1)
    next_continuation_token = response1["NextContinuationToken"]
    response2 = client.list_objects_v2(Bucket=bucket_name, ContinuationToken=next_continuation_token)
    assert response2["ContinuationToken"] == next_continuation_token
    assert response2["IsTruncated"] is False
    assert _get_keys(response2) == ["baz", "foo", "quxx"]


def test_bucket_listv2_both_continuationtoken_startafter():
    key_names = ["bar", "baz", "foo", "quxx"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response1 = client.list_objects_v2(Bucket=bucket_name, StartAfter="bar", MaxKeys=1)
    next_continuation_token = response1["NextContinuationToken"]
    response2 = client.list_objects_v2(Bucket=bucket_name, StartAfter="bar", ContinuationToken=next_continuation_token)
    assert response2["ContinuationToken"] == next_continuation_token
    assert response2["StartAfter"] == "bar"
    assert response2["IsTruncated"] is False
    assert _get_keys(response2) == ["foo", "quxx"]


@pytest.mark.lowtail
def test_bucket_listv2_continuationtoken_invalid():
    bucket_name = _create_objects(keys=["bar"])
    client = get_client()
    e = assert_raises(ClientError, client.list_objects_v2, Bucket=bucket_name, ContinuationToken="not-a-token!")
    assert _get_status_and_error_code(e.response) == (400, "InvalidArgument")


def test_bucket_list_marker_unreadable():
    key_names = ["bar", "baz", "foo", "quxx"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.list_objects(Bucket=bucket_name, Marker="\x0a")
    assert response["Marker"] == "\x0a"
    assert response["IsTruncated"] is False
    assert _get_keys(response) == key_names


def test_bucket_listv2_startafter_unreadable():
    key_names = ["bar", "baz", "foo", "quxx"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name, StartAfter="\x0a")
    assert response["StartAfter"] == "\x0a"
    assert response["IsTruncated"] is False
    assert _get_keys(response) == key_names


def test_bucket_list_marker_not_in_list():
    bucket_name = _create_objects(keys=["bar", "baz", "foo", "quxx"])
    client = get_client()
    response = client.list_objects(Bucket=bucket_name, Marker="blah")
    assert response["Marker"] == "blah"
    assert _get_keys(response) == ["foo", "quxx"]


def test_bucket_listv2_startafter_not_in_list():
    bucket_name = _create_objects(keys=["bar", "baz", "foo", "quxx"])
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name, StartAfter="blah")
    assert response["StartAfter"] == "blah"
    assert _get_keys(response) == ["foo", "quxx"]


def test_bucket_list_marker_after_list():
    bucket_name = _create_objects(keys=["bar", "baz", "foo", "quxx"])
    client = get_client()
    response = client.list_objects(Bucket=bucket_name, Marker="zzz")
    assert response["Marker"] == "zzz"
    assert response["IsTruncated"] is False
    assert _get_keys(response) == []


def test_bucket_listv2_startafter_after_list():
    bucket_name = _create_objects(keys=["bar", "baz", "foo", "quxx"])
    client = get_client()
    response = client.list_objects_v2(Bucket=bucket_name, StartAfter="zzz")
    assert response["StartAfter"] == "zzz"
    assert response["IsTruncated"] is False
    assert _get_keys(response) == []


def test_bucket_list_return_data():
    # Upstream takes the expected owner from GetObjectAcl, which lowtail does not implement (no
    # ACLs); the owner is the requester's access key, as ListBuckets reports it.
    key_names = ["bar", "baz", "foo"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    owner = client.list_buckets()["Owner"]
    data = {}
    for key_name in key_names:
        obj_response = client.head_object(Bucket=bucket_name, Key=key_name)
        data[key_name] = {
            "DisplayName": owner["DisplayName"],
            "ID": owner["ID"],
            "ETag": obj_response["ETag"],
            "LastModified": obj_response["LastModified"],
            "ContentLength": obj_response["ContentLength"],
        }
    response = client.list_objects(Bucket=bucket_name)
    for obj in response["Contents"]:
        key_data = data[obj["Key"]]
        assert obj["ETag"] == key_data["ETag"]
        assert obj["Size"] == key_data["ContentLength"]
        assert obj["Owner"]["DisplayName"] == key_data["DisplayName"]
        assert obj["Owner"]["ID"] == key_data["ID"]
        # HTTP dates have whole seconds; the listing may have milliseconds.
        assert obj["LastModified"].replace(microsecond=0) == key_data["LastModified"]


@pytest.mark.lowtail
def test_bucket_list_paginate_all():
    # Every key exactly once over pages of 3, v1 through NextMarker and v2 through tokens, with a
    # delimiter rolling some keys into common prefixes.
    keys = ["a%02d" % i for i in range(10)] + ["dir%d/x" % i for i in range(4)] + ["z"]
    bucket_name = _create_objects(keys=keys)
    client = get_client()
    seen, marker = [], ""
    while True:
        response = client.list_objects(Bucket=bucket_name, Delimiter="/", MaxKeys=3, Marker=marker)
        # A page lists keys and common prefixes apart; together they are in key order.
        seen += sorted(_get_keys(response) + _get_prefixes(response))
        if not response["IsTruncated"]:
            break
        marker = response["NextMarker"]
    expected = ["a%02d" % i for i in range(10)] + ["dir%d/" % i for i in range(4)] + ["z"]
    assert seen == expected
    seen, params = [], dict(Bucket=bucket_name, Delimiter="/", MaxKeys=3)
    while True:
        response = client.list_objects_v2(**params)
        assert response["KeyCount"] == len(_get_keys(response)) + len(_get_prefixes(response))
        seen += sorted(_get_keys(response) + _get_prefixes(response))
        if not response["IsTruncated"]:
            break
        params["ContinuationToken"] = response["NextContinuationToken"]
    assert seen == expected


@pytest.mark.lowtail
def test_list_object_versions_unversioned():
    # An unversioned bucket: every object is its one version, VersionId "null", the latest.
    key_names = ["bar", "baz", "foo"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.list_object_versions(Bucket=bucket_name)
    versions = response["Versions"]
    assert [v["Key"] for v in versions] == key_names
    for version in versions:
        assert version["VersionId"] == "null"
        assert version["IsLatest"] is True
        head = client.head_object(Bucket=bucket_name, Key=version["Key"])
        assert version["ETag"] == head["ETag"]
        assert version["Size"] == head["ContentLength"] == 3
    assert "DeleteMarkers" not in response
    assert response["IsTruncated"] is False


@pytest.mark.lowtail
def test_list_object_versions_unversioned_paging():
    key_names = ["a/1", "a/2", "b", "c", "d/1"]
    bucket_name = _create_objects(keys=key_names)
    client = get_client()
    response = client.list_object_versions(Bucket=bucket_name, MaxKeys=2)
    assert [v["Key"] for v in response["Versions"]] == ["a/1", "a/2"]
    assert response["IsTruncated"] is True
    assert response["NextKeyMarker"] == "a/2"
    response = client.list_object_versions(
        Bucket=bucket_name, MaxKeys=2, KeyMarker=response["NextKeyMarker"], VersionIdMarker=response["NextVersionIdMarker"]
    )
    assert [v["Key"] for v in response["Versions"]] == ["b", "c"]
    response = client.list_object_versions(Bucket=bucket_name, Delimiter="/")
    assert [v["Key"] for v in response["Versions"]] == ["b", "c"]
    assert _get_prefixes(response) == ["a/", "d/"]
    response = client.list_object_versions(Bucket=bucket_name, Prefix="a/")
    assert [v["Key"] for v in response["Versions"]] == ["a/1", "a/2"]


@pytest.mark.lowtail
def test_list_object_versions_not_exist():
    client = get_client()
    e = assert_raises(ClientError, client.list_object_versions, Bucket="s3compat-no-such-bucket-here")
    assert _get_status_and_error_code(e.response) == (404, "NoSuchBucket")
