"""Services no request can kill: every node of the graph registers its services through here.

A request is input from anyone on the ROS domain. rclpy lets an exception out of a service
callback end the executor's spin, and with it the node's process (and, for a `required` node,
the whole graph): before, `LoadDemonstration` with a 5,000-character path under an allowed
folder raised `OSError` (ENAMETOOLONG) out of the policy server's callback and killed it. So each
callback runs inside `guarded`: an error of a kind the node expects from bad requests is
answered `success=False` with its message; any other error (a bug the request reached) is
answered the same way with its type, so nothing a client sends can end the node. Either way the
refusal is one log line. Every service of the graph answers `success` and `message` fields.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rclpy.node import Node

#: Longest refusal message sent back and logged (characters): a reason may quote the request (a
#: path, a name), which can be megabytes long; one line of it is enough to tell what was wrong.
MAX_REASON_CHARS = 1000

ServiceCallback = Callable[[Any, Any], Any]


def one_line(reason: str, limit: int = MAX_REASON_CHARS) -> str:
    """`reason` on one line (whitespace runs collapsed) and at most `limit` characters."""
    text = " ".join(reason.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def guarded(
    node: Node, service: str, callback: ServiceCallback, expected: tuple[type[BaseException], ...] = ()
) -> ServiceCallback:
    """`callback` as a service callback that answers every request (see the module docstring).

    `expected`: the error kinds a bad request raises on purpose (their message is the answer);
    any other `Exception` is reported with its type, as an internal error."""

    def serve(request: Any, response: Any) -> Any:
        try:
            return callback(request, response)
        except expected as exc:
            reason = str(exc)
        except Exception as exc:  # a request must never end the node; the refusal names the error
            reason = f"internal error: {type(exc).__name__}: {exc}"
        response.success, response.message = False, one_line(reason)
        node.get_logger().warning(f"{service}: request refused: {response.message}")
        return response

    return serve


def create_guarded_service(
    node: Node,
    srv_type: Any,
    service: str,
    callback: ServiceCallback,
    expected: tuple[type[BaseException], ...] = (),
    **kwargs: Any,
) -> Any:
    """`node.create_service` with the callback `guarded`; `kwargs` go to `create_service`."""
    return node.create_service(srv_type, service, guarded(node, service, callback, expected), **kwargs)
