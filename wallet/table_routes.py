"""The API's table routes: each row of ``contracts.caller_permissions.ROUTES`` served as FastAPI routes.

Every wallet endpoint registers itself here (:func:`serve`), under each spelling of its row, as a
:class:`LeanRoute`: the endpoint runs only when the request's one match (what the permission
check judged, :func:`wallet.routing.matched`) is its route, with that match's parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any, cast

from fastapi import FastAPI, Request
from fastapi.responses import Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from contracts.caller_permissions import Route
from wallet.routing import matched

#: A route's endpoint: a coroutine taking the request and its path parameters.
Endpoint = Callable[..., Coroutine[Any, Any, Response]]


class LeanRoute(APIRoute):
    """An APIRoute that calls its endpoint with the raw ``Request`` and path parameters.

    FastAPI's default handler solves dependencies and validates parameters with pydantic on every
    request (~100 us here); these endpoints take only strings from the path and validate them
    themselves with :mod:`wallet.validation`. The route is still a regular APIRoute, so the OpenAPI
    document is generated from the same endpoint signature and ``responses`` as always.

    A route of the table (:attr:`table_route`, set by :func:`serve`) runs only when the request's
    one match (:func:`wallet.routing.matched`, what the permission check judged) is that route, and
    takes its parameters from that match: where Starlette's own reading of a path differs from the
    table's, nothing runs and the answer is 404.
    """

    table_route: Route | None = None

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        endpoint = self.endpoint

        async def handle(request: Request) -> Response:
            response: Response = await endpoint(request, **request.path_params)
            return response

        async def handle_table_route(request: Request) -> Response:
            match = matched(request.scope)
            if match is None or match.route is not self.table_route:
                raise StarletteHTTPException(404, "Not Found")
            response: Response = await endpoint(request, **match.parameters)
            return response

        return handle if self.table_route is None else handle_table_route


def serve(app: FastAPI, route: Route, **documentation: Any) -> Callable[[Endpoint], Endpoint]:
    """Register an endpoint as ``route`` of the table, under each of its spellings, answered directly.

    Seed 000's implementation routes ``/deposit`` and ``/transfer/{id}`` without a trailing slash
    while its design writes them with one; serving both (instead of redirecting) lets clients of
    either work. Both are in the OpenAPI document, so the fuzzer checks both; the alias's
    operation id ends in ``_alt``. The endpoint's name must be the route's: the table names what runs.
    """
    route_class = cast(type[LeanRoute], type(f"LeanRoute_{route.name}", (LeanRoute,), {"table_route": route}))

    def register(
        endpoint: Endpoint,
    ) -> Endpoint:
        if endpoint.__name__ != route.name:
            raise ValueError(f"endpoint {endpoint.__name__} would serve route {route.name}")
        summary = documentation.pop("summary", route.name)
        for index, path in enumerate(route.spellings):
            app.router.add_api_route(
                path,
                endpoint,
                methods=[route.method],
                operation_id=route.name if index == 0 else f"{route.name}_alt",
                summary=summary if index == 0 else f"{summary} (the same, spelt {path!r})",
                route_class_override=route_class,
                **documentation,
            )
        return endpoint

    return register
