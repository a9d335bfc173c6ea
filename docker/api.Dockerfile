# The wallet API image (cdk/walletlake_cdk/api_service.py): `walletlake serve` on Python 3.11, ARM64.
# Built by `cdk deploy` (the CDK CLI runs `docker build` for the asset and pushes it to the
# bootstrap repository); synthesis only stages this context. Dependencies are the project's own
# lock (docker/api-requirements.txt, generated from the tested environment), installed --no-deps:
# nothing unpinned enters the image.
FROM public.ecr.aws/docker/library/python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1

WORKDIR /app
COPY docker/api-requirements.txt /app/docker/api-requirements.txt
RUN pip install --no-deps --only-binary=:all: -r /app/docker/api-requirements.txt

COPY contracts /app/contracts
COPY wallet /app/wallet
COPY stream_processor /app/stream_processor
COPY lake /app/lake
COPY queries /app/queries
COPY walletlake /app/walletlake
# The project's packages as they are (nothing to build): `python -m walletlake.cli` is the
# `walletlake` console script.
ENV PYTHONPATH=/app

# Nobody: the task's root filesystem is read-only; the server writes nothing but, behind Lattice, its
# key and certificate under TMPDIR=/dev/shm (memory; cdk/walletlake_cdk/api_service.py).
USER 65534:65534
EXPOSE 8080
CMD ["python", "-m", "walletlake.cli", "serve", "--host", "0.0.0.0", "--port", "8080"]
