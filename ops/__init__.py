"""Operational scripts that act on deployed stacks through the AWS APIs (not CDK code)."""
