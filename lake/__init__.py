"""The lake on S3: landing batches, the Iceberg tables and their commits, compaction, snapshots.

Modules, by job (the tables' specs and the S3 layout they follow are contracts, in
:mod:`contracts.lake_tables` and :mod:`contracts.lake_layout`):

- :mod:`lake.parquet`, :mod:`lake.objects`: one way to encode Parquet, and the S3 calls every
  module makes (put, conditional put, list, delete);
- :mod:`lake.writer`: a decoded batch → its landing objects (plain-Parquet lake);
- :mod:`lake.landing_log`, :mod:`lake.iceberg_landing`, :mod:`lake.committer`: the Iceberg lake's
  exactly-once path, landed files → a log record per batch → one commit per interval;
- :mod:`lake.iceberg_catalog`, :mod:`lake.iceberg_table_heads` (a table's head for a query, without
  pyiceberg), :mod:`lake.iceberg_tables`, :mod:`lake.iceberg_files`,
  :mod:`lake.iceberg_maintenance`, :mod:`lake.iceberg_cleanup`, :mod:`lake.iceberg_migration`: the
  catalog, the tables' creation and properties, compaction as an atomic rewrite, snapshot expiry
  and orphan removal, and the move from plain Parquet;
- :mod:`lake.compaction_kernel` (pure), :mod:`lake.compaction`, :mod:`lake.compaction_units`: the
  plain-Parquet lake's compaction, in bounded units;
- :mod:`lake.compaction_lease`: one compaction at a time across the state machines;
- :mod:`lake.snapshots`: the table's balances at an instant, in parallel-scan segments;
- :mod:`lake.glue`: the Glue table definitions, derived from the specs.
"""
