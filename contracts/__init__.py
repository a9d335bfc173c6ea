"""The bottom layer: configuration and the contracts every other package shares.

Settings (the ``WALLETLAKE_*`` variables), the DynamoDB table's items, the lake's table specs and
the money limits live here, importing nothing of walletlake's own, so the domain packages
(``wallet``, ``lake``, ``stream_processor``, ``queries``), the application (``walletlake``) and the
CDK app all read them from one place (docs/architecture.md, "Layers").
"""
