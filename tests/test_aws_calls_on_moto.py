"""Every AWS call in ops/ and orchestrator/ runs against moto in at least one test, or is a call moto lacks,
run against a Stubber, with the reason (tests/aws_calls_on_moto.py). That the named tests make their calls
on moto is checked as they run (tests/conftest.py); this module checks the table against the code, and that
the checks can fail."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from tests import moto_recorder
from tests.aws_call_inventory import code_files, scan
from tests.aws_calls_on_moto import ON_MOTO, STUBBED, MotoLacks

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def inventory():
    return scan(code_files(REPO), REPO)


@pytest.fixture
def credentials(monkeypatch):
    for name, value in {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x"}.items():
        monkeypatch.setenv(name, value)


def test_every_aws_call_in_the_code_has_a_row(inventory):
    calls, _ = inventory
    missing = [call for call in calls if call.call not in ON_MOTO and call.call not in STUBBED]
    rows = sorted(
        {f'    "{c.call}": ("tests/<path>.py::<test that runs it under mock_aws>",),' for c in missing}
    )
    assert not missing, (
        "AWS calls with no test against moto:\n"
        + "\n".join(f"  {c.where}: {c.call}" for c in missing)
        + "\nAdd to ON_MOTO in tests/aws_calls_on_moto.py:\n"
        + "\n".join(rows)
        + "\n(or, where moto cannot answer it, a STUBBED row with the reason and a probe: not_implemented()"
        " there makes one). To see which tests make a call against moto: .venv/bin/pytest tests/ops "
        "tests/orchestrator --record-moto-calls=calls.json"
    )


def test_every_aws_call_in_the_code_can_be_named(inventory):
    _, problems = inventory
    assert problems == []


def test_no_row_for_a_call_the_code_no_longer_makes(inventory):
    calls, _ = inventory
    made = {call.call for call in calls}
    assert sorted(set(ON_MOTO) - made) == [], "remove these rows from ON_MOTO in tests/aws_calls_on_moto.py"
    assert sorted(set(STUBBED) - made) == [], "remove these rows from STUBBED in tests/aws_calls_on_moto.py"
    assert not set(ON_MOTO) & set(STUBBED)


def _defined(node_id: str) -> bool:
    """Whether the test a node id names is defined: its file, then its function (or Class::method); a
    parametrized id's [...] is the parameters'."""
    path, *names = node_id.split("[", 1)[0].split("::")
    file = REPO / path
    if not file.is_file() or not names:
        return False
    scope: list[ast.stmt] = ast.parse(file.read_text()).body
    for name in names:
        found = [n for n in scope if isinstance(n, ast.FunctionDef | ast.ClassDef) and n.name == name]
        if not found:
            return False
        scope = found[0].body if isinstance(found[0], ast.ClassDef) else []
    return names[-1].startswith("test")


def test_every_row_names_tests_that_exist():
    named = {(call, test) for call, tests in ON_MOTO.items() for test in tests}
    named |= {(call, test) for call, lacks in STUBBED.items() for test in lacks.tests}
    missing = sorted(f"{call}: {test}" for call, test in named if not _defined(test))
    assert missing == [], "tests/aws_calls_on_moto.py names tests that do not exist"
    assert all(ON_MOTO.values()) and all(lacks.tests for lacks in STUBBED.values())


def _moto_answers(call: str, lacks: MotoLacks) -> str | None:
    """Why the exemption no longer holds, if moto now answers the probe (under mock_aws)."""
    with mock_aws():
        try:
            answer = lacks.probe()
        except Exception as error:  # the probe's failure is the point
            assert lacks.answer in f"{type(error).__name__}: {error}", f"{call}: moto now says {error!r}"
            return None
    return (
        f"moto now answers {call} ({answer!r:.200}): {lacks.reason} no longer holds. Write a test that runs "
        "it under mock_aws and move the row from STUBBED to ON_MOTO in tests/aws_calls_on_moto.py."
    )


@pytest.mark.parametrize("call", sorted(STUBBED))
def test_moto_still_lacks_each_stubbed_call(credentials, call):
    assert _moto_answers(call, STUBBED[call]) is None


# ---- the checks can fail ----------------------------------------------------------------------------------
def test_the_recorder_counts_what_moto_answers_and_nothing_else(credentials):
    with mock_aws(), moto_recorder.recording() as made:
        ssm = boto3.client("ssm", region_name="us-east-1")
        ssm.put_parameter(Name="/kit/x", Value="1", Type="String")
        with pytest.raises(ssm.exceptions.ParameterNotFound):
            ssm.get_parameter(Name="/kit/missing")  # moto's AWS error: the call ran on moto
        with pytest.raises(NotImplementedError):
            boto3.client("service-quotas", region_name="us-east-1").list_service_quotas(ServiceCode="vpc")
        lambda_client = boto3.client("lambda", region_name="us-east-1")
        with pytest.raises(lambda_client.exceptions.ClientError):
            lambda_client.get_account_settings()  # "Not yet implemented"
        stubbed = boto3.client("ec2", region_name="us-east-1")
        with Stubber(stubbed) as stub:
            stub.add_response("describe_vpcs", {"Vpcs": []}, {})
            stubbed.describe_vpcs()
    assert made == {("ssm", "PutParameter"), ("ssm", "GetParameter")}
    assert moto_recorder.unmet(["ssm:put_parameter", "ssm:get_parameter"], made) == []
    assert moto_recorder.unmet(["ec2:describe_vpcs", "service-quotas:list_service_quotas"], made) == [
        "ec2:describe_vpcs",
        "service-quotas:list_service_quotas",
    ]


def test_a_stub_exemption_expires_once_moto_answers_the_call(credentials):
    answered = MotoLacks(
        reason="(say) moto lacks DescribeVpcs",
        tests=(),
        probe=lambda: boto3.client("ec2", region_name="us-east-1").describe_vpcs(),
        answer="has not been implemented",
    )
    assert "moto now answers ec2:describe_vpcs" in (_moto_answers("ec2:describe_vpcs", answered) or "")


def test_the_inventory_finds_calls_by_method_and_paginator_and_reports_what_it_cannot_name(tmp_path):
    code = tmp_path / "ops" / "tool.py"
    code.parent.mkdir()
    code.write_text(
        textwrap.dedent(
            """
            def read(session, name):
                ecs = session.client("ecs")
                service_quotas = session.client("service-quotas")
                ec2 = session.client("ec2")
                ecs.get_paginator("list_services").paginate(cluster=name)
                service_quotas.get_paginator("list_services").paginate()
                ec2.describe_vpcs()
                for operation in ("describe_subnets", "describe_nat_gateways"):
                    ec2.get_paginator(operation).paginate()
                client = ecs if name else service_quotas
                client.list_services()
                session.get_credentials()  # a session's, not an AWS call
                return {}.get(name)
            """
        )
    )
    calls, problems = scan([code], tmp_path)
    assert [(c.call, c.where) for c in calls] == [
        ("ecs:list_services", "ops/tool.py:6"),
        ("service-quotas:list_services", "ops/tool.py:7"),
        ("ec2:describe_vpcs", "ops/tool.py:8"),
        ("ec2:describe_nat_gateways", "ops/tool.py:10"),
        ("ec2:describe_subnets", "ops/tool.py:10"),
    ]
    assert problems == [
        "ops/tool.py:12: list_services could be a call of several services; name its client after its "
        "service (ecs, service_quotas, ...)"
    ]
