"""Self-tests of tests/servers/creds_server.py and of moto as servers.py runs it (ctest `servers`
runs them through servers.py --only ...,s3,creds): botocore's own credential providers must take
the stand-in for EC2 instance metadata and a container endpoint, the credentials it hands out
must read moto's S3 until they expire and be refused after (400 ExpiredToken, as AWS answers),
and moto's STS must answer an unsigned AssumeRoleWithWebIdentity. test_remote_creds.c counts
on each. Outside the runner (RF_TEST_CREDS unset) they are skipped.
"""
import json
import os
import time
import urllib.error
import urllib.request

import pytest


def env(name):
    value = os.environ.get(name)
    if not value:
        pytest.skip(f"{name} is not set: run under tests/servers/servers.py --only s3,creds")
    return value


def call(method, path, body=None, headers=None):
    req = urllib.request.Request(env("RF_TEST_CREDS") + path, method=method, data=body,
                                 headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def config(**settings):
    assert call("POST", "/_config", json.dumps(settings).encode())[0] == 200


def log():
    return json.loads(call("GET", "/_log")[1])["requests"]


@pytest.fixture(autouse=True)
def reset():
    env("RF_TEST_CREDS")
    assert call("POST", "/_reset")[0] == 200


def s3_with(key_id, secret, token):
    boto3 = pytest.importorskip("boto3")
    return boto3.client("s3", endpoint_url=env("RF_TEST_S3_ENDPOINT"),
                        region_name=env("RF_TEST_S3_REGION"), aws_access_key_id=key_id,
                        aws_secret_access_key=secret, aws_session_token=token)


def lists(client):
    return client.list_objects_v2(Bucket=env("RF_TEST_S3_BUCKET"))["KeyCount"] > 0


def refused(call_):
    from botocore.exceptions import ClientError
    with pytest.raises(ClientError) as e:
        call_()
    r = e.value.response
    return r["ResponseMetadata"]["HTTPStatusCode"], r["Error"]["Code"]


def test_botocore_takes_it_for_instance_metadata():
    from botocore.credentials import InstanceMetadataProvider
    from botocore.utils import InstanceMetadataFetcher
    fetcher = InstanceMetadataFetcher(
        timeout=2, num_attempts=1,
        config={"ec2_metadata_service_endpoint": env("RF_TEST_CREDS")})
    creds = InstanceMetadataProvider(iam_role_fetcher=fetcher).load()
    frozen = creds.get_frozen_credentials()
    assert frozen.access_key.startswith("ASIA") and frozen.token
    base = "/latest/meta-data/iam/security-credentials/"
    assert [(q["method"], q["path"]) for q in log()] == [
        ("PUT", "/latest/api/token"), ("GET", base), ("GET", base + "ringfeed-reader")]
    assert all(q["imds_token"] for q in log()[1:])
    assert lists(s3_with(frozen.access_key, frozen.secret_key, frozen.token))


def test_instance_metadata_wants_its_token():
    base = "/latest/meta-data/iam/security-credentials/"
    assert call("GET", base)[0] == 401
    assert call("PUT", "/latest/api/token")[0] == 400  # without the TTL header
    status, token = call("PUT", "/latest/api/token",
                         headers={"x-aws-ec2-metadata-token-ttl-seconds": "60"})
    assert status == 200
    assert call("GET", base, headers={"x-aws-ec2-metadata-token": token.decode()}) == \
        (200, b"ringfeed-reader")
    config(imds="v1")
    assert call("PUT", "/latest/api/token")[0] == 404 and call("GET", base)[0] == 200
    config(imds="no-role")
    assert call("GET", base)[0] == 401


def test_botocore_takes_it_for_a_container_endpoint():
    from botocore.credentials import ContainerProvider
    from botocore.exceptions import CredentialRetrievalError
    config(container_auth="tok-1")
    url = env("RF_TEST_CREDS") + "/ecs/task"
    provider = ContainerProvider(environ={"AWS_CONTAINER_CREDENTIALS_FULL_URI": url,
                                          "AWS_CONTAINER_AUTHORIZATION_TOKEN": "tok-1"})
    frozen = provider.load().get_frozen_credentials()
    assert lists(s3_with(frozen.access_key, frozen.secret_key, frozen.token))
    assert log()[-1]["authorization"] == "tok-1"
    wrong = ContainerProvider(environ={"AWS_CONTAINER_CREDENTIALS_FULL_URI": url,
                                       "AWS_CONTAINER_AUTHORIZATION_TOKEN": "tok-2"})
    with pytest.raises(CredentialRetrievalError):
        wrong.load()


def test_temporary_credentials_expire():
    config(lifetime_s=2)
    k = json.loads(call("GET", "/issue")[1])
    client = s3_with(k["AccessKeyId"], k["SecretAccessKey"], k["Token"])
    assert lists(client)
    assert refused(lambda: s3_with(k["AccessKeyId"], k["SecretAccessKey"], None)
                   .list_objects_v2(Bucket=env("RF_TEST_S3_BUCKET")))[0] == 403
    time.sleep(2.5)
    assert refused(lambda: lists(client)) == (400, "ExpiredToken")


def test_sts_web_identity_unsigned():
    boto3 = pytest.importorskip("boto3")
    from botocore import UNSIGNED
    from botocore.config import Config
    sts = boto3.client("sts", endpoint_url=env("RF_TEST_S3_ENDPOINT"),
                       region_name=env("RF_TEST_S3_REGION"),
                       config=Config(signature_version=UNSIGNED))
    for role, may_read in ((env("RF_TEST_ROLE_ARN"), True),
                           (env("RF_TEST_ROLE_DENIED_ARN"), False)):
        c = sts.assume_role_with_web_identity(RoleArn=role, RoleSessionName="rf-test",
                                              WebIdentityToken="eyJ.test.jwt")["Credentials"]
        client = s3_with(c["AccessKeyId"], c["SecretAccessKey"], c["SessionToken"])
        if may_read:
            assert lists(client)
        else:
            assert refused(lambda: lists(client)) == (403, "AccessDenied")


def test_other_requests_logged():
    assert call("GET", "/rf-test/gen/shard-0000.tar")[0] == 404
    assert [(q["method"], q["path"]) for q in log()] == [("GET", "/rf-test/gen/shard-0000.tar")]
