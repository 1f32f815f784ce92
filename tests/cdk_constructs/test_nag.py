import pytest

from cdk_constructs.nag import acknowledge


def test_acknowledgment_without_a_real_reason_is_refused(stack):
    with pytest.raises(ValueError, match="AwsSolutions-S1 needs a reason"):
        acknowledge(stack, "AwsSolutions-S1", "because")


def test_acknowledgment_is_recorded_on_the_construct(stack):
    acknowledge(stack, "AwsSolutions-S1", "A reason that is long enough to explain itself.")
    entries = [entry.data for entry in stack.node.metadata if entry.type == "aws:cdk:acknowledged-rules"]
    assert entries and "A reason that is long enough" in str(entries)
