<?php

declare(strict_types=1);

namespace Hearth\Internal\Queue;

/**
 * The tables of a file: queue: byte for byte the hearth-queue crate's
 * src/file/schema.sql, run in one BEGIN IMMEDIATE transaction when a
 * file has none yet, as the crate does. The crate's test
 * `the_php_producer_creates_the_crates_schema` fails when the two differ
 * (or when VERSION is not the version the crate accepts): change the
 * crate's schema, then copy it here.
 *
 * @internal
 */
final class FileSchema
{
    /** The `schema` row of table `meta` the crate accepts; any other is refused. */
    public const VERSION = 'hearth-queue 1';

    public const SQL = <<<'SQL'
-- The embedded queue: one SQLite file, one queue. Times are ms since the
-- Unix epoch on this host's clock.
CREATE TABLE IF NOT EXISTS jobs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, -- the job id; never reused
    state INTEGER NOT NULL,               -- 0 waiting, 1 reserved, 2 dead
    payload BLOB,
    attempts INTEGER NOT NULL DEFAULT 0,  -- deliveries so far
    max_attempts INTEGER,
    backoff_ms INTEGER,
    backoff_max_ms INTEGER,
    reply_to TEXT,
    enqueued_at INTEGER,
    due_at INTEGER NOT NULL,              -- waiting: ready once due_at <= now
    consumer TEXT,                        -- reserved: who holds it
    touched_at INTEGER,                   -- reserved: when, or last extended
    last_error TEXT,
    dead_reason TEXT,
    dead_at INTEGER
);
CREATE INDEX IF NOT EXISTS jobs_due ON jobs (state, due_at, id);
CREATE INDEX IF NOT EXISTS jobs_touched ON jobs (state, touched_at);
CREATE TABLE IF NOT EXISTS results (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    channel TEXT NOT NULL,
    job_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    status TEXT NOT NULL,                 -- done or dead
    result BLOB,
    reason TEXT,
    error TEXT,
    created_at INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS results_channel ON results (channel, seq);
CREATE TABLE IF NOT EXISTS counters (
    name TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta (key, value) VALUES ('schema', 'hearth-queue 1');

SQL;
}
