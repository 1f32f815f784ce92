"""The host's edge: a request-size cap in front of Triton's HTTP and gRPC frontends (see body_cap.py)."""
