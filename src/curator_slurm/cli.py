"""The ``curator-slurm`` command."""

from __future__ import annotations

import argparse
import sys

from curator_slurm import __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="curator-slurm",
        description="Run data-curation pipelines sharded across Slurm job arrays.",
    )
    parser.add_argument("--version", action="version", version=f"curator-slurm {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    shard = sub.add_parser("shard", help="print which shard this process would take (from the environment)")
    shard.add_argument("--json", action="store_true", help="print as JSON")
    return parser


def cmd_shard(args: argparse.Namespace) -> int:
    import json

    from curator_slurm.slurm.env import ShardSpec

    spec = ShardSpec.from_env()
    if args.json:
        print(
            json.dumps(
                {
                    "index": spec.index,
                    "count": spec.count,
                    "enabled": spec.enabled,
                    "strategy": spec.strategy,
                    "origin": spec.origin,
                }
            )
        )
    else:
        print(f"{spec.label} ({spec.origin}), strategy {spec.strategy}")
    return 0


def main(argv: list[str] | None = None) -> int:
    from curator_slurm.errors import CuratorError

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return {"shard": cmd_shard}[args.command](args)
    except CuratorError as e:
        print(f"curator-slurm {args.command}: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
