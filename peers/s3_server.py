#!/usr/bin/env python3
"""A real S3-compatible server for the object-storage tests: moto's server (a maintained
implementation of the S3 protocol, from PyPI, pinned in scripts/deps.sh) on loopback, with its
IAM authentication on, so every request must carry a valid AWS Signature V4 of a key moto issued.

The first few actions are unauthenticated (moto's INITIAL_NO_AUTH_ACTION_COUNT): they create a
user, its policy and its access key; from then on a wrong secret is refused (SignatureDoesNotMatch).

Prints one JSON line: {"endpoint": ..., "key_id": ..., "secret": ..., "bucket": ...}, then serves
until killed.
"""
import json
import os
import sys
import time

os.environ["INITIAL_NO_AUTH_ACTION_COUNT"] = "5"
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
# The bootstrap calls below sign with these; moto does not check them before the count runs out.
os.environ.setdefault("AWS_ACCESS_KEY_ID", "bootstrap")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "bootstrap")

import boto3  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402


def main():
    bucket = sys.argv[1] if len(sys.argv) > 1 else "doc2ci"
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    port = server._server.server_port
    endpoint = f"http://127.0.0.1:{port}"
    iam = boto3.client("iam", endpoint_url=endpoint, region_name="us-east-1")
    iam.create_user(UserName="doc2ci")
    iam.put_user_policy(
        UserName="doc2ci",
        PolicyName="s3",
        PolicyDocument=json.dumps(
            {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
        ),
    )
    key = iam.create_access_key(UserName="doc2ci")["AccessKey"]
    s3 = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id=key["AccessKeyId"],
        aws_secret_access_key=key["SecretAccessKey"],
    )
    s3.create_bucket(Bucket=bucket)
    print(json.dumps({"endpoint": endpoint, "key_id": key["AccessKeyId"], "secret": key["SecretAccessKey"],
                      "bucket": bucket}), flush=True)
    while True:
        time.sleep(3600)


if __name__ == "__main__":
    main()
