# syntax=docker/dockerfile:1
#
# rmq-namesrv images, one Dockerfile, two targets:
#
#   docker build -t rmq-namesrv:0.1.0 .                             # target "runtime" (last stage, default)
#   docker build --target skew -t rmq-namesrv-skew:0.1.0 .          # + headless JRE + the [spark] extra
#
# Why two images: the worker image (python slim + the wheel and its deps, roughly 200 MB) is pulled by every
# node a worker lands on, so scale-out stays fast; the skew image adds a JRE (~200 MB) and PySpark, pyarrow,
# pandas and matplotlib (~600 MB), about 1 GB in all, and is only pulled by the node running the CronJob.
# Both run as the numeric non-root user 10001 the Helm chart's securityContext expects.
#
# The base is pinned to Debian bookworm so that default-jre-headless is OpenJDK 17, a Java that PySpark 3.5
# and 4.x both support.
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---------------------------------------------------------------------------------------------- wheels
FROM ${PYTHON_IMAGE} AS wheels
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what the package build needs (see .dockerignore); README.md is the project's `readme`.
COPY pyproject.toml README.md ./
COPY service ./service
COPY lua ./lua
# The project's wheel plus wheels of all its runtime dependencies.
RUN pip wheel --wheel-dir /wheels .

# The [spark] extra's wheels on top (pyspark is an sdist: pip builds its wheel here, not in the final image).
FROM wheels AS wheels-spark
RUN pip wheel --wheel-dir /wheels ".[spark]"

# ---------------------------------------------------------------------------------------------- base
FROM ${PYTHON_IMAGE} AS base
# The root filesystem is read-only under the chart: whatever needs to write (HOME, matplotlib's cache) uses
# /tmp, an emptyDir there.
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    HOME=/tmp \
    MPLCONFIGDIR=/tmp/matplotlib
RUN groupadd --system --gid 10001 namesrv \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /tmp --shell /usr/sbin/nologin namesrv
WORKDIR /tmp
# RocketMQ's native protocol (brokers, clients, mqadmin) and HTTP (API, address server, console, /metrics): the
# chart's containerPort values remotingPort and containerPort.
EXPOSE 9876 8080

# ---------------------------------------------------------------------------------------------- skew
FROM base AS skew
# A headless JRE for PySpark's local[*] driver (the man1 directory works around the JRE's postinst on slim).
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends default-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/default-java \
    SPARK_LOCAL_DIRS=/tmp/spark
# Installs from the wheels stage only (bind mount: the wheels never land in a layer). The package name is
# the project's; `.[spark]` above built the extra's wheels.
RUN --mount=type=bind,from=wheels-spark,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels "rmq-namesrv[spark]" \
 && namesrv --help >/dev/null
USER 10001:10001
ENTRYPOINT ["namesrv"]
CMD ["serve"]

# ---------------------------------------------------------------------------------------------- runtime
FROM base AS runtime
RUN --mount=type=bind,from=wheels,source=/wheels,target=/wheels \
    pip install --no-index --find-links=/wheels rmq-namesrv \
 && namesrv --help >/dev/null
USER 10001:10001
ENTRYPOINT ["namesrv"]
CMD ["serve"]
