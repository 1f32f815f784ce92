"""One orchestrator run at a time without reserved concurrency: a lease in a DynamoDB table, taken with a
conditional write.

Reserved concurrency 1 serializes runs, but Lambda lets a function reserve concurrency only while the
account keeps at least 100 unreserved (Lambda developer guide, "Configuring reserved concurrency"), and new
accounts have been seen with a concurrency quota of 10 or 50: there the global stack's first deploy fails.
A conditional PutItem succeeds for one writer only (DynamoDB developer guide, "Condition expressions"), so
a second run that starts while the first holds the lease skips its minute; the next minute's run decides
again. A run killed by its timeout cannot release the lease, so the lease ends on its own a little after
the function's timeout, before the next scheduled run.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

TABLE_VARIABLE = "ORCHESTRATOR_LOCK_TABLE"
KEY_ATTRIBUTE = "lock"
LOCK_KEY = "orchestrator-run"
# The function's timeout is 50 s and runs are a minute apart: a lease of 55 s outlives any run and has
# ended when the next scheduled one starts.
LEASE_SECONDS = 55


@dataclass
class RunLock:
    dynamodb: Any  # a boto3 DynamoDB client
    table: str
    holder: str  # this invocation (its request id)
    lease_seconds: int = LEASE_SECONDS

    def acquire(self, now: datetime) -> bool:
        """True when this run now holds the lease; False while another run's lease holds."""
        moment = int(now.timestamp())
        try:
            self.dynamodb.put_item(
                TableName=self.table,
                Item={
                    KEY_ATTRIBUTE: {"S": LOCK_KEY},
                    "holder": {"S": self.holder},
                    "expires_at": {"N": str(moment + self.lease_seconds)},
                },
                ConditionExpression="attribute_not_exists(#key) OR expires_at <= :now",
                ExpressionAttributeNames={"#key": KEY_ATTRIBUTE},
                ExpressionAttributeValues={":now": {"N": str(moment)}},
            )
        except self.dynamodb.exceptions.ConditionalCheckFailedException:
            return False
        return True

    def release(self) -> None:
        """Give the lease back, if it is still this run's (a lease that ran out may be another's now)."""
        with contextlib.suppress(self.dynamodb.exceptions.ConditionalCheckFailedException):
            self.dynamodb.delete_item(
                TableName=self.table,
                Key={KEY_ATTRIBUTE: {"S": LOCK_KEY}},
                ConditionExpression="holder = :me",
                ExpressionAttributeValues={":me": {"S": self.holder}},
            )
