"""The traffic orchestrator Lambda's code. This folder is the Lambda's asset as it is (plain modules, no
build step): Powertools comes from AWS's public layer, boto3 from the runtime."""
