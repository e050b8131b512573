"""The job's SparkSession: local[*] by default, any master otherwise, and executors that start the Python
running this job (not whatever `python3` is first on their PATH).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Mapping
from typing import Any

from service.skew.options import JobOptions

PYTHON_CONF = "spark.pyspark.python"
DRIVER_PYTHON_CONF = "spark.pyspark.driver.python"


def python_interpreters(conf: Mapping[str, str], environ: Mapping[str, str]) -> tuple[str, str]:
    """(executor python, driver python): what the user set (--conf, then PYSPARK_PYTHON /
    PYSPARK_DRIVER_PYTHON), else the interpreter running this job. pyspark's own default is `python3` from
    the PATH, which is not this interpreter when the job was started as /path/venv/bin/namesrv without
    activating the virtualenv (executors then fail with ModuleNotFoundError: redis)."""
    python = conf.get(PYTHON_CONF) or environ.get("PYSPARK_PYTHON") or sys.executable
    driver = conf.get(DRIVER_PYTHON_CONF) or environ.get("PYSPARK_DRIVER_PYTHON") or sys.executable
    return python, driver


def quiet_pandas_notice() -> None:
    """pyspark's type converters import pyspark.testing.utils, which warns (FutureWarning) that pyspark does
    not fully support pandas >= 3. The job does not use pyspark's pandas conversions (tables come through
    Arrow: DataFrame.toArrow, then pyarrow's to_pandas), so that notice is the one warning silenced here:
    importing the module once, at start, under a filter for exactly that message."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
        import pyspark.testing.utils  # noqa: F401


def spark_session(opts: JobOptions) -> tuple[Any, bool]:
    """(session, owned): an already active session (tests, notebooks) is reused and not stopped."""
    quiet_pandas_notice()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    conf = dict(opts.conf)
    python, driver = python_interpreters(conf, os.environ)
    # pyspark reads the executors' interpreter from the environment when it creates the context (the conf
    # entries tell spark-submit and the Spark UI the same thing).
    os.environ["PYSPARK_PYTHON"] = python
    os.environ["PYSPARK_DRIVER_PYTHON"] = driver
    master = opts.master or (None if "PYSPARK_GATEWAY_PORT" in os.environ else "local[*]")
    b = SparkSession.builder.appName("namesrv-skew-report")
    if master:
        b = b.master(master)
    b = b.config("spark.ui.showConsoleProgress", "false")  # progress goes to the log instead
    b = b.config(PYTHON_CONF, python).config(DRIVER_PYTHON_CONF, driver)
    for key, value in opts.conf:
        b = b.config(key, value)
    return b.getOrCreate(), True
