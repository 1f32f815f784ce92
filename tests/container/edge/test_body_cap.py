"""The cap is the largest body a request the model accepts can need: nothing valid is refused at the edge."""

from __future__ import annotations

import json

import pytest

from assistant.request import RequestLimits
from edge.body_cap import max_request_body_bytes

pytestmark = pytest.mark.vllm_version


def test_the_longest_valid_question_in_the_widest_json_spelling_fits_under_the_cap():
    limits = RequestLimits()
    question = "\U0001f97e" * limits.max_prompt_chars  # hiking boot emoji: two \\uXXXX escapes each
    sampling = json.dumps({"stop": ["\u00e9" * 10]}).ljust(limits.max_sampling_json_bytes)
    body = json.dumps(
        {
            "id": "x" * 64,
            "text_input": question,
            "stream": True,
            "sampling_parameters": sampling,
            "exclude_input_in_output": True,
            "parameters": {"priority": 0},
        }
    ).encode()
    assert len(body) <= max_request_body_bytes(limits)


def test_the_cap_follows_the_configured_question_limit():
    small = RequestLimits.from_env({"ASSISTANT_MAX_PROMPT_CHARS": "1000"})
    assert max_request_body_bytes(small) < max_request_body_bytes(RequestLimits())
    # Far below the bodies that crash Triton 2.51 (8 MB) at the default limits.
    assert max_request_body_bytes(RequestLimits()) < 128 * 1024
