"""``walletlake lake``: operations on the lake as a whole; ``migrate`` moves it into Iceberg,
``reland`` lands the misfit files a table can now take, each exactly once, ``register`` rebuilds
a lost catalog from the tables' own metadata files."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from contracts.lake_table_names import STREAM_TABLE_NAMES
from contracts.settings import Settings
from lake.migration_commits import DEFAULT_FILES_PER_COMMIT
from walletlake.days import day_argument

#: Exit status of a run that left days alone (the table already held other files for them).
EXIT_SKIPPED = 2
#: Exit status of a re-land that refused a misfit (the table still cannot take it) or failed one
#: (it could not be read or landed): the others were re-landed all the same.
EXIT_REFUSED = 1


def register(subparsers: Any) -> None:
    """Add the sub-command's parser."""
    parser = subparsers.add_parser(
        "lake",
        help="operations on the lake as a whole (migrate: the plain-Parquet lake into Iceberg)",
        description="Operations on the lake as a whole.",
    )
    actions = parser.add_subparsers(dest="lake_command", metavar="ACTION", required=True)
    migrate_parser = actions.add_parser(
        "migrate",
        help="register the plain-Parquet lake's compacted files in the Iceberg tables",
        description=(
            "Registers every compacted file under {lake_prefix}/{table}/dt=*/ in its Iceberg table, "
            "where it lies: no data is read (footers only), copied or rewritten. A day still holding "
            "landing objects is refused (run `walletlake compact --date DAY` first), and a refused run "
            "commits nothing. Running it again registers only what is missing. A day the table already "
            f"holds other files for (the stream's) is skipped, exit status {EXIT_SKIPPED}, unless "
            "named with --include-day."
        ),
    )
    migrate_parser.add_argument(
        "--table",
        dest="tables",
        action="append",
        choices=STREAM_TABLE_NAMES,
        default=None,
        help="a table to migrate (repeatable; default: all of them)",
    )
    migrate_parser.add_argument(
        "--dry-run", action="store_true", help="check everything and list what would be registered"
    )
    migrate_parser.add_argument(
        "--include-day",
        dest="include_days",
        action="append",
        type=day_argument,
        default=[],
        metavar="YYYY-MM-DD",
        help="register this day even though the table holds other files for it (repeatable)",
    )
    migrate_parser.add_argument(
        "--files-per-commit",
        type=int,
        default=DEFAULT_FILES_PER_COMMIT,
        help="files registered per Iceberg commit",
    )
    migrate_parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    migrate_parser.set_defaults(func=_migrate)
    reland_parser = actions.add_parser(
        "reland",
        help="land the misfit files (_misfits/) a table can now take, each exactly once",
        description=(
            "Lands every file under {lake_prefix}/_misfits/{table}/ that the table can now take (after "
            "the upgrade that added its columns, or after the file was converted), as a source named by "
            "the file, then commits. Running it again lands nothing: a file already re-landed is "
            "reported 'already relanded', and a row the table already holds (its entry_id, its "
            "wallet_id) is never landed again. A file the table still cannot take is reported "
            "'refused' with why, one that cannot be read or landed 'failed', and nothing of it is "
            f"written; the other files are re-landed all the same; exit status {EXIT_REFUSED}, each "
            "such file named on stderr. The misfit files are "
            "left in place: delete them once their rows are in (docs/operations.md, 'Misfit files')."
        ),
    )
    reland_parser.add_argument(
        "--table",
        dest="tables",
        action="append",
        choices=STREAM_TABLE_NAMES,
        default=None,
        help="a table whose misfits to re-land (repeatable; default: all of them)",
    )
    reland_parser.add_argument(
        "--dry-run", action="store_true", help="check every misfit and say what would be landed"
    )
    reland_parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    reland_parser.set_defaults(func=_reland)
    register_parser = actions.add_parser(
        "register",
        help="register the lake's tables from their own metadata files in a catalog that lost them",
        description=(
            "For each Iceberg table the configured catalog does not hold, finds its newest metadata "
            "file under the table's location (the lake bucket's iceberg/ folder, or where the catalog "
            "places tables itself) and registers the table from it, with its schemas, snapshots, refs "
            "and properties (the committer's progress): the lake as it was, nothing rewritten. A table "
            "already in the catalog is left as it is; a table without metadata files is left to "
            "provisioning. Run it when provisioning refuses to create a table over its own files."
        ),
    )
    register_parser.add_argument(
        "--table",
        dest="tables",
        action="append",
        choices=STREAM_TABLE_NAMES,
        default=None,
        help="a table to register (repeatable; default: all of them)",
    )
    register_parser.add_argument(
        "--dry-run", action="store_true", help="find each table's metadata file and register nothing"
    )
    register_parser.add_argument("--json", action="store_true", help="print the report as one JSON object")
    register_parser.set_defaults(func=_register)


def _migrate(args: argparse.Namespace) -> int:
    import boto3

    from lake.iceberg_catalog import open_catalog
    from lake.iceberg_migration import migrate

    settings = Settings.from_env()
    session = boto3.Session(region_name=settings.region)

    def progress(line: str) -> None:
        print(f"  {line}", file=sys.stderr, flush=True)

    report = migrate(
        settings,
        open_catalog(settings, session),
        session.client("s3"),
        tables=tuple(args.tables or STREAM_TABLE_NAMES),
        dry_run=args.dry_run,
        progress=progress,
        include_days=frozenset(args.include_days),
        files_per_commit=args.files_per_commit,
    )
    if args.json:
        print(json.dumps(report.to_dict()))
    else:
        verb = "would register" if args.dry_run else "registered"
        print(f"migration{' (dry run)' if args.dry_run else ''}:")
        for name, table in report.tables.items():
            done = sum(1 for day in table.days if day.state == "done")
            print(
                f"  {name:<11} {verb} {table.files_registered} files, {table.rows_registered:,} rows "
                f"({len(table.days)} days: {done} already migrated, {len(table.skipped)} skipped; "
                f"{len(table.snapshot_ids)} commits)"
            )
        for day in report.skipped:
            print(f"  skipped {day.table} {day.day}: {day.reason}")
    return EXIT_SKIPPED if report.skipped else 0


def _reland(args: argparse.Namespace) -> int:
    import boto3

    from lake.committer import commit_now
    from lake.iceberg_catalog import open_catalog
    from lake.misfits import reland_misfits

    settings = Settings.from_env()
    session = boto3.Session(region_name=settings.region)
    done = reland_misfits(
        settings,
        session.client("s3"),
        open_catalog(settings, session),
        tables=tuple(args.tables or STREAM_TABLE_NAMES),
        dry_run=args.dry_run,
    )
    landed = [reland for reland in done if reland.state == "relanded"]
    # What was re-landed is queryable when the command returns, not at the committer's next cycle.
    commit = commit_now(settings).as_dict() if landed else None
    if args.json:
        print(json.dumps({"misfits": [reland.as_dict() for reland in done], "commit": commit}))
    else:
        print(f"misfits: {len(done)} found, {len(landed)} relanded")
        for reland in done:
            print(f"  {reland.line()}")
        if commit is not None:
            print(f"  committed {commit['rows']} rows")
    stopped = [reland for reland in done if reland.stopped]
    for reland in stopped:
        print(f"walletlake lake reland: {reland.line()}", file=sys.stderr)
    return EXIT_REFUSED if stopped else 0


def _register(args: argparse.Namespace) -> int:
    import dataclasses

    import boto3

    from contracts.lake_layout import table_location_root
    from lake.iceberg_catalog import open_catalog
    from lake.iceberg_register import register_tables

    settings = Settings.from_env()
    session = boto3.Session(region_name=settings.region)
    done = register_tables(
        open_catalog(settings, session),
        settings.glue_database,
        # where the committer places the tables (AWS), then where the catalog places them itself
        (table_location_root(settings.bucket, settings.lake_prefix), None),
        tables=tuple(args.tables or STREAM_TABLE_NAMES),
        dry_run=args.dry_run,
    )
    if args.json:
        print(json.dumps({"tables": [dataclasses.asdict(table) for table in done]}))
    else:
        print(f"register{' (dry run)' if args.dry_run else ''}:")
        for table in done:
            print(f"  {table.line()}")
    return 0
