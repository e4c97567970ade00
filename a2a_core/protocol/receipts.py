"""GET /receipts/{messageId}: a signed receipt of the decision on a message the caller sent
(`a2a_core.services.ledger_audit.ledger_receipt`), fetched after the call.

The caller authenticates as for its calls (its bearer token or a trusted issuer's JWT) and
gets receipts for its own messages only: another agent's messageId is answered 404, as one
that does not exist. Errors are the REST binding's error payload (`google.rpc.Status`)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from a2a_core.asyncdb import db
from a2a_core.errors import FieldProblem, NotFound, ValidationFailed
from a2a_core.models import Agent, Direction, Message
from a2a_core.protocol.errors import to_a2a
from a2a_core.protocol.gate import rest_caller, rest_refusal
from a2a_core.services.ledger_audit import ledger_receipt

MAX_MESSAGE_ID = 128


def _receipt_of(caller: Agent, message_id: str) -> str:
    row = (
        Message.objects.filter(sender=caller, message_id=message_id, direction=Direction.REQUEST)
        .order_by("-pk")
        .only("pk")
        .first()
    )
    token = ledger_receipt(row.pk) if row is not None else None
    if token is None:
        raise NotFound(f"no receipt for message {message_id!r} sent by {caller.slug}")
    return token


async def receipt_endpoint(request: Request) -> Response:
    caller = await rest_caller(request)
    if isinstance(caller, Response):
        return caller
    message_id = request.path_params["message_id"]
    if not message_id or len(message_id) > MAX_MESSAGE_ID or not message_id.isprintable():
        return rest_refusal(
            to_a2a(
                ValidationFailed(
                    "invalid messageId",
                    [FieldProblem("messageId", f"1 to {MAX_MESSAGE_ID} printable characters")],
                )
            )
        )
    try:
        receipt = await db(_receipt_of, caller, message_id)
    except NotFound as exc:
        return rest_refusal(to_a2a(exc))
    return JSONResponse({"messageId": message_id, "receipt": receipt})
