"""Stacks: build constructs' props from the validated Settings and compose the constructs."""
