"""SageMaker's hosting standards on the app, as vLLM's server puts them there.

vLLM's server hands its app to `model-hosting-container-standards` (AWS's package for model containers
on SageMaker) once every route and middleware is in; so does ours, with the same handlers registered:

- `/ping` (GET) is our liveness probe, and `/invocations` our SageMaker handler inside the package's
  stateful-session transform and its transform that writes the `X-Amzn-SageMaker-Adapter-Identifier`
  header into the body's `model`;
- the package then loads what the container's operator configured, as under vLLM: a customer script
  (`SAGEMAKER_MODEL_PATH` and `CUSTOM_SCRIPT_FILENAME`) with its `@custom_middleware`, `@input_formatter`,
  `@output_formatter`, `@custom_ping_handler` and `@custom_invocation_handler`, and the middlewares and
  handlers named by its environment variables (`CUSTOM_FASTAPI_MIDDLEWARE_THROTTLE`,
  `CUSTOM_PRE_PROCESS`, `CUSTOM_POST_PROCESS`, `CUSTOM_FASTAPI_PING_HANDLER`, ...);
- it mounts `/ping` and `/invocations` over the resolved handlers (the customer's, else ours), in place
  of the route table's, and adds the customer's middlewares outermost.

Importing the package sets the root logger's level from `SAGEMAKER_CONTAINER_LOG_LEVEL` (ERROR by
default) and may raise its handlers' levels: both are put back, as vLLM puts back its handlers' levels.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from fastapi import FastAPI, Request, Response

from vllm_server.errors import BadRequest
from vllm_server.http.route import Handler

__all__ = ["bootstrap", "invocation_handler", "ping_handler"]


def ping_handler(handler: Handler) -> Handler:
    """`handler` (the liveness probe) registered as the framework's `/ping` handler."""
    with _logging_kept():
        standards = _standards()
        registered: Handler = standards.register_ping_handler(handler)
    return registered


def invocation_handler(handler: Handler) -> Handler:
    """`handler` inside the package's stateful-session and adapter-header transforms, registered as the
    framework's `/invocations` handler: what the route table serves."""
    with _logging_kept():
        standards = _standards()
        transformed = standards.stateful_session_manager()(
            standards.inject_adapter_id(adapter_path="model")(handler)
        )
        registered: Handler = standards.register_invocation_handler(_type_errors_refused(transformed))
    return registered


def bootstrap(app: FastAPI) -> None:
    """Hand `app` (every route and middleware in) to SageMaker's hosting standards: the customer's
    handlers and middlewares, and `/ping` and `/invocations` over the customer's handlers where there are
    some (see the module docstring)."""
    with _logging_kept():
        _standards().bootstrap(app)


def _standards() -> Any:
    import model_hosting_container_standards.sagemaker as standards

    return standards


def _type_errors_refused(handler: Handler) -> Handler:
    """`handler`, its TypeError a 400 with Python's words: what the transforms meet on a body that is no
    JSON object (a list has no `model` to set, a number no `requestType` to look for), answered as
    vLLM's exception handler answers a TypeError."""

    async def invocations(raw_request: Request) -> Response:
        try:
            response: Response = await handler(raw_request)
        except TypeError as exc:
            raise BadRequest(str(exc)) from exc
        return response

    return invocations


@contextmanager
def _logging_kept() -> Iterator[None]:
    """The root logger's level and the levels of its handlers, as they were before."""
    root = logging.getLogger()
    level = root.level
    handlers = [(handler, handler.level) for handler in root.handlers]
    try:
        yield
    finally:
        root.setLevel(level)
        for handler, handler_level in handlers:
            handler.setLevel(handler_level)
