"""Tests of RemoteLlm against real GrpcFrontends over loopback."""
