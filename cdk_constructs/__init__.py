"""Reusable constructs of a regional serving stack, one concern each; each owns its alarms.

Not named `constructs`: that would shadow the `constructs` library that aws-cdk-lib imports.
"""
