"""The plain-Python request path of the shopping assistant: validate -> plan -> retrieve -> prompt -> metrics.

Nothing here imports Triton, vLLM or torch, so every step runs and is tested without the serving stack.
"""
