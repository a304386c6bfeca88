-- distlock's tables on PostgreSQL. The store creates them on first use
-- (under an advisory lock, so that Clients starting together do not race)
-- unless it was made WithoutMigration; `distlock sql-schema postgres`
-- prints this file with the table name filled in, for teams that apply
-- migrations themselves. {{table}} is the table name (WithTable; default
-- distlock_locks).

-- One row per lock name, never deleted: token, the last fencing token
-- issued for the name, only ever grows. state is the lock's holders, its
-- queue and its abandoned owners (JSON, read and written by the store
-- inside a transaction that holds the row FOR UPDATE); kind, owner_id and
-- expires_at repeat what state says, for people and for List:
--   SELECT name, kind, owner_id, expires_at - now() AS left
--   FROM distlock_locks WHERE expires_at > now();
-- rev counts the row's writes: waiters that poll look for it to change.
-- Only name is indexed, and the table leaves half of each page free, so
-- that a step's update is a heap-only tuple on the same page (no index
-- write, and the page prunes its dead versions itself); List reads the
-- whole table.
CREATE TABLE IF NOT EXISTS {{table}} (
    name       text PRIMARY KEY,
    kind       text NOT NULL DEFAULT '',
    owner_id   text,
    expires_at timestamptz,
    token      bigint NOT NULL DEFAULT 0,
    rev        bigint NOT NULL DEFAULT 0,
    state      text NOT NULL DEFAULT '{}'
) WITH (fillfactor = 50);

-- The records of the jobs that run once (Client.Once, Client.OncePer):
-- one row per job, kept until keep_until.
CREATE TABLE IF NOT EXISTS {{table}}_once (
    name       text PRIMARY KEY,
    period     bigint NOT NULL,
    token      bigint NOT NULL,
    at         timestamptz NOT NULL,
    pid        integer NOT NULL,
    host       text NOT NULL,
    err        text NOT NULL,
    keep_until timestamptz NOT NULL
);
