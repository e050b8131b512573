"""What `namesrv admin` takes from the operator rather than the server: the token (a file, or the server's own
variables; never a flag, which `ps` shows) and the answer to "go ahead?" on a terminal. Every command module may
use it (it imports no command)."""

from __future__ import annotations

import argparse
import os
import stat
import sys
from collections.abc import Mapping

from service.admin.client import EXIT_REFUSED, EXIT_USAGE, AdminError


def read_token(args: argparse.Namespace, env: Mapping[str, str]) -> tuple[str | None, str]:
    """(token, AccessKey for the native door) from --token-file, else the server's own variables."""
    if args.token_file:
        try:
            st = os.stat(args.token_file)
            with open(args.token_file, encoding="utf-8") as fh:
                token = fh.read().strip()
        except OSError as exc:
            raise AdminError(EXIT_USAGE, f"--token-file: {exc}") from None
        if not token:
            raise AdminError(EXIT_USAGE, f"--token-file {args.token_file}: the file is empty")
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            print(f"namesrv admin: warning: {args.token_file} is readable by others (chmod 600 it)",
                  file=sys.stderr)
        return token, args.access_key or "admin"
    if env.get("NAMESRV_ADMIN_TOKEN"):
        return env["NAMESRV_ADMIN_TOKEN"], "admin"
    if env.get("NAMESRV_READ_TOKEN"):
        return env["NAMESRV_READ_TOKEN"], "read"
    return None, "admin"


def confirm(args: argparse.Namespace, question: str) -> None:
    """Go on with --yes; ask on a terminal; refuse (exit 2) when nobody can answer."""
    if getattr(args, "yes", False):
        return
    if not sys.stdin.isatty():
        raise AdminError(EXIT_USAGE, f"{question} Not asked: stdin is not a terminal; pass --yes to go ahead")
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    answer = sys.stdin.readline().strip().lower()
    if answer not in ("y", "yes"):
        raise AdminError(EXIT_REFUSED, "aborted: nothing was changed", "ABORTED")
