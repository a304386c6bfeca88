-- distlock's tables on MariaDB (10.6 and later) and MySQL (8.0 and later).
-- The store creates them on first use (under GET_LOCK, so that Clients
-- starting together do not race) unless it was made WithoutMigration;
-- `distlock sql-schema mysql` prints this file with the table name filled
-- in, for teams that apply migrations themselves. {{table}} is the table
-- name (WithTable; default distlock_locks).

-- One row per lock name, never deleted: token, the last fencing token
-- issued for the name, only ever grows. Names are compared byte for byte
-- (VARBINARY: "Jobs" and "jobs" are two locks). state is the lock's
-- holders, its queue and its abandoned owners (JSON, read and written by
-- the store inside a transaction that holds the row FOR UPDATE); kind,
-- owner_id and expires_at (UTC) repeat what state says, for people and
-- for List:
--   SELECT CAST(name AS CHAR), kind, owner_id, expires_at
--   FROM distlock_locks WHERE expires_at > UTC_TIMESTAMP(6);
-- rev counts the row's writes: waiters poll for it to change. Only name
-- is indexed, so that a step's update writes no secondary index; List
-- reads the whole table.
CREATE TABLE IF NOT EXISTS {{table}} (
    name       VARBINARY(512) NOT NULL PRIMARY KEY,
    kind       VARCHAR(16) NOT NULL DEFAULT '',
    owner_id   VARCHAR(16) NULL,
    expires_at DATETIME(6) NULL,
    token      BIGINT UNSIGNED NOT NULL DEFAULT 0,
    rev        BIGINT UNSIGNED NOT NULL DEFAULT 0,
    state      LONGTEXT NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- The records of the jobs that run once (Client.Once, Client.OncePer):
-- one row per job, kept until keep_until (UTC).
CREATE TABLE IF NOT EXISTS {{table}}_once (
    name       VARBINARY(512) NOT NULL PRIMARY KEY,
    period     BIGINT UNSIGNED NOT NULL,
    token      BIGINT UNSIGNED NOT NULL,
    at         DATETIME(6) NOT NULL,
    pid        INT NOT NULL,
    host       VARCHAR(255) NOT NULL,
    err        TEXT NOT NULL,
    keep_until DATETIME(6) NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
