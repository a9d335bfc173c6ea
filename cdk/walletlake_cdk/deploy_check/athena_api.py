"""Athena's API on loopback, for the functions that call Athena themselves (through awswrangler).

The classify function runs the reconciliation's rare second pass (``reconcile_wallet_problems``)
with ``awswrangler.athena.read_sql_query`` when a count asks for it. On the embedded stack there is
no Athena, so the deploy check serves the four calls awswrangler makes (``GetWorkGroup``,
``StartQueryExecution``, ``GetQueryExecution``, ``GetQueryResults``) over Athena's JSON 1.1 protocol
from :class:`~walletlake_cdk.deploy_check.local_athena.LocalAthena`, which runs the query on DuckDB
and writes its result as Athena does: one CSV under the workgroup's output location. The functions
find it through ``AWS_ENDPOINT_URL_ATHENA``, the SDK's own variable.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from walletlake_cdk.deploy_check.local_athena import AthenaQueryError, LocalAthena


class AthenaApiServer:
    """A threaded HTTP server answering Athena's JSON API from a :class:`LocalAthena`."""

    def __init__(self, athena: LocalAthena, workgroups: dict[str, dict[str, Any]]) -> None:
        self.athena = athena
        self.workgroups = workgroups
        self.calls: list[str] = []
        handler = _handler_class(self)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> AthenaApiServer:
        """Serve in a background thread."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self._server.shutdown()
        self._server.server_close()

    def answer(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        """One operation's answer; :class:`KeyError` / :class:`AthenaQueryError` become 400s."""
        self.calls.append(operation)
        if operation == "GetWorkGroup":
            name = body["WorkGroup"]
            return {"WorkGroup": {"Name": name, "State": "ENABLED", "Configuration": self.workgroups[name]}}
        if operation == "StartQueryExecution":
            configuration = self.workgroups.get(body.get("WorkGroup", ""), {})
            output = configuration.get("ResultConfiguration", {}).get("OutputLocation")
            return self.athena.start_query_execution({**body, "OutputLocation": output})
        if operation == "GetQueryExecution":
            return self.athena.get_query_execution(body["QueryExecutionId"])
        if operation == "GetQueryResults":
            return self.athena.get_query_results(body["QueryExecutionId"], int(body.get("MaxResults", 1000)))
        raise AthenaQueryError(f"operation {operation} is not served locally")


def _handler_class(server: AthenaApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            operation = self.headers.get("X-Amz-Target", "").rpartition(".")[2]
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            try:
                status, answer = 200, server.answer(operation, body)
            except (KeyError, AthenaQueryError) as error:
                status, answer = 400, {"__type": "InvalidRequestException", "Message": str(error)}
            payload = json.dumps(answer, default=str).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/x-amz-json-1.1")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: the calls are kept in :attr:`AthenaApiServer.calls`."""

    return Handler
