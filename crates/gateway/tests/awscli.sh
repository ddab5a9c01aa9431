#!/usr/bin/env bash
# Drives a lowtail S3 endpoint with aws-cli v2: mb, cp up and down (small, and ~20 MiB so the CLI uses
# multipart), server-side cp and mv between buckets (CopyObject for the small object, UploadPartCopy
# for the large one), ls, rm, rb. Usage: awscli.sh ENDPOINT ACCESS_KEY SECRET_KEY [AWS_BINARY]
# Exits non-zero on the first failure or on differing bytes.
set -euo pipefail

endpoint=$1
export AWS_ACCESS_KEY_ID=$2
export AWS_SECRET_ACCESS_KEY=$3
aws_bin=${4:-aws}
# aws-cli mishandles a CA bundle from the environment even for plain http endpoints.
unset AWS_CA_BUNDLE AWS_PROFILE AWS_SESSION_TOKEN
export AWS_DEFAULT_REGION=us-east-1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null
export AWS_EC2_METADATA_DISABLED=true AWS_PAGER=""

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
s3() { "$aws_bin" --endpoint-url "$endpoint" s3 "$@"; }
cp_quietly() { s3 cp --no-progress "$@"; }

bucket="awscli-$$"
s3 mb "s3://$bucket"
printf 'hello from aws-cli\n' > "$work/small.txt"
head -c $((20 * 1024 * 1024 + 12345)) /dev/urandom > "$work/large.bin"
cp_quietly "$work/small.txt" "s3://$bucket/dir/small.txt"
cp_quietly "$work/large.bin" "s3://$bucket/large.bin"
# Listings are captured first: `grep -q` closing the pipe early would make aws-cli fail with EPIPE.
listing=$(s3 ls "s3://$bucket/")
grep -q 'PRE dir/' <<< "$listing"
grep -q 'large.bin' <<< "$listing"
recursive=$(s3 ls --recursive "s3://$bucket/")
grep -q 'dir/small.txt' <<< "$recursive"
cp_quietly "s3://$bucket/dir/small.txt" "$work/small.back"
cp_quietly "s3://$bucket/large.bin" "$work/large.back"
cmp "$work/small.txt" "$work/small.back"
cmp "$work/large.bin" "$work/large.back"
# Server-side copies into a second bucket, then a move back; the copies read back identical.
s3 mb "s3://$bucket-copy"
cp_quietly "s3://$bucket/dir/small.txt" "s3://$bucket-copy/small.txt"
cp_quietly "s3://$bucket/large.bin" "s3://$bucket-copy/large.bin"
cp_quietly "s3://$bucket-copy/small.txt" "$work/small.copy"
cp_quietly "s3://$bucket-copy/large.bin" "$work/large.copy"
cmp "$work/small.txt" "$work/small.copy"
cmp "$work/large.bin" "$work/large.copy"
s3 mv --no-progress "s3://$bucket-copy/large.bin" "s3://$bucket/moved.bin"
cp_quietly "s3://$bucket/moved.bin" "$work/moved.back"
cmp "$work/large.bin" "$work/moved.back"
s3 rm "s3://$bucket-copy/small.txt"
s3 rb "s3://$bucket-copy"
s3 rm "s3://$bucket/dir/small.txt"
s3 rm "s3://$bucket/large.bin"
s3 rm "s3://$bucket/moved.bin"
s3 rb "s3://$bucket"
echo "aws-cli: all steps passed"
