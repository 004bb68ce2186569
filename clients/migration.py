"""The migration test: a PostgreSQL 15 database dumped with pg_dump and
restored into tablegate with psql, then compared.

It generates TPC-H data (tpchgen-cli, scale factor 0.01), loads it into a
PostgreSQL 15 it starts on a free port with the schema in
clients/tpch/schema.sql (primary keys, foreign keys, numerics, dates) and
a table of events with a serial id, an enum type and other types (EVENTS
below), dumps
the database with pg_dump, restores the dump into a tablegate it starts on
another free port with `psql -v ON_ERROR_STOP=1 -f`, and checks that every
table has the same row count and checksum on both, and that the 22 TPC-H
queries in clients/tpch/queries return the same rows. Then the other way:
pg_dump of tablegate's database, restored into a new PostgreSQL database,
with the same checksums and keys, its serial going on where tablegate's
stood.

Usage: migration.py TABLEGATE_BINARY
Prints one line per check and ends with "N passed, M failed".
"""

import decimal
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

HERE = Path(__file__).resolve().parent
PG_BIN = Path("/usr/lib/postgresql/15/bin")
SCALE = "0.01"
TABLES = {
    "region": "r_regionkey",
    "nation": "n_nationkey",
    "part": "p_partkey",
    "supplier": "s_suppkey",
    "partsupp": "ps_partkey, ps_suppkey",
    "customer": "c_custkey",
    "orders": "o_orderkey",
    "lineitem": "l_orderkey, l_linenumber",
    "events": "id",
}

# A serial id (a sequence, its default and setval in the dump) and the types
# TPC-H does not use, arrays and an enum type among them.
EVENTS = """
CREATE TYPE severity AS ENUM ('low', 'high', 'page me');
CREATE TABLE events (
  id serial PRIMARY KEY,
  level severity NOT NULL DEFAULT 'low',
  happened timestamptz NOT NULL,
  ref uuid,
  payload jsonb,
  flag boolean,
  ratio double precision,
  raw bytea,
  customer integer REFERENCES customer,
  tags text[] DEFAULT '{}'::text[] NOT NULL,
  scores integer[]
);
INSERT INTO events (level, happened, ref, payload, flag, ratio, raw, customer, tags, scores)
SELECT (ARRAY['low', 'high', 'page me'])[1 + n % 3]::severity,
       timestamptz '2026-01-01 00:00:00+00' + n * interval '1 hour 1 second',
       md5(n::text)::uuid,
       jsonb_build_object('n', n, 'tags', jsonb_build_array('a', n % 3)),
       n % 2 = 0, n / 7.0, decode(md5(n::text), 'hex'), 1 + n % 1500,
       CASE WHEN n % 5 = 0 THEN '{}' ELSE ARRAY['a b', 'x"' || n, NULL] END,
       CASE WHEN n % 4 <> 0 THEN ARRAY[n, -n, NULL] END
FROM generate_series(1, 500) AS n;
DELETE FROM events WHERE id % 10 = 0;
COMMENT ON TABLE events IS 'what happened, and when';
COMMENT ON COLUMN events.payload IS 'as the source sent it';
"""

# Each enum type's labels, in order, and the columns of each type.
ENUM_LABELS = (
    "SELECT t.typname, e.enumlabel, e.enumsortorder, "
    "(SELECT string_agg(a.attname, ',') FROM pg_attribute a WHERE a.atttypid = t.oid) "
    "FROM pg_type t JOIN pg_enum e ON e.enumtypid = t.oid ORDER BY 1, 3"
)

passed = 0
failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name} {detail}".rstrip())
    else:
        failed += 1
        print(f"FAIL {name} {detail}".rstrip())


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, what, process):
    for _ in range(300):
        if process.poll() is not None:
            raise RuntimeError(f"{what} exited with {process.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"{what} did not listen on port {port}")


def as_postgres_user(args):
    """initdb and postgres refuse to run as root: run them as `postgres`."""
    if os.geteuid() == 0:
        return ["runuser", "-u", "postgres", "--", *args]
    return args


def start_postgres(work):
    data = work / "pgdata"
    data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(data, "postgres")
        shutil.chown(work, "postgres")
    subprocess.run(
        as_postgres_user([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
        check=True,
        stdout=subprocess.DEVNULL,
    )
    port = free_port()
    process = subprocess.Popen(
        as_postgres_user(
            [str(PG_BIN / "postgres"), "-D", str(data), "-p", str(port), "-k", str(work),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"]
        ),
        stdout=subprocess.DEVNULL,
        stderr=open(work / "postgres.log", "w"),
    )
    wait_for(port, "postgres", process)
    # It listens before it accepts connections ("the database system is
    # starting up").
    for _ in range(300):
        ready = subprocess.run([str(PG_BIN / "pg_isready"), "-q", "-h", "127.0.0.1", "-p", str(port)])
        if ready.returncode == 0:
            break
        time.sleep(0.1)
    return process, port


def start_tablegate(binary, work):
    port = free_port()
    process = subprocess.Popen(
        [binary, "serve", "--data-dir", str(work / "tablegate"), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=open(work / "tablegate.log", "w"),
    )
    wait_for(port, "tablegate", process)
    return process, port


def canonical(value):
    """A value as both servers must agree on it."""
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    if isinstance(value, float):
        return repr(value)
    return str(value)


def table_digest(conn, table, key):
    """Row count and SHA-256 of every row in key order."""
    digest = hashlib.sha256()
    rows = 0
    with conn.cursor(name=f"all_{table}") as cur:
        cur.itersize = 5000
        cur.execute(f"SELECT * FROM {table} ORDER BY {key}")
        for row in cur:
            digest.update("|".join("\\N" if v is None else canonical(v) for v in row).encode())
            digest.update(b"\n")
            rows += 1
    return rows, digest.hexdigest()


def same_value(got, expected):
    """Whether tablegate's value is PostgreSQL's. Numbers may differ in the
    last digit tablegate gives: DataFusion computes averages and quotients
    of numerics to fewer decimals than PostgreSQL (see README)."""
    if got is None or expected is None:
        return got is None and expected is None
    numbers = (int, float, decimal.Decimal)
    if isinstance(got, numbers) and isinstance(expected, numbers):
        a, b = decimal.Decimal(str(got)), decimal.Decimal(str(expected))
        last_digit = decimal.Decimal(1).scaleb(min(a.as_tuple().exponent, 0))
        return abs(a - b) <= max(last_digit, max(abs(a), abs(b)) * decimal.Decimal("1e-12"))
    return got == expected


def check_restore(name, dump, conninfo):
    """Runs a dump with psql -f, stopping at its first error, and checks
    that it ran through; returns whether it did."""
    started = time.perf_counter()
    restore = subprocess.run(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), conninfo],
        capture_output=True,
        text=True,
    )
    ok = restore.returncode == 0
    check(name, ok, f"({time.perf_counter() - started:.1f}s)" if ok else restore.stderr[-2000:])
    return ok


def check_same_tables(label, expected_conn, got_conn):
    """Checks that every table has the same rows on both connections."""
    for table, key in TABLES.items():
        expected = table_digest(expected_conn, table, key)
        got = table_digest(got_conn, table, key)
        detail = f"{got[0]} rows, sha256 {got[1][:16]}" if got == expected else f"{got} != {expected}"
        check(f"{label} {table}", got == expected, detail)


def check_same_rows(name, sql, expected_conn, got_conn, noun):
    """Checks that `sql` returns the same rows on both connections."""
    expected = expected_conn.execute(sql).fetchall()
    got = got_conn.execute(sql).fetchall()
    check(name, got == expected, f"{len(got)} {noun}" if got == expected else f"{got} != {expected}")


def run_query(conn, sql):
    started = time.perf_counter()
    with conn.cursor() as cur:
        cur.execute(sql)
        rows = cur.fetchall()
    return rows, time.perf_counter() - started


def main():
    binary = sys.argv[1]
    work = Path(tempfile.mkdtemp(prefix="tablegate-migration-"))
    processes = []
    try:
        data = work / "data"
        subprocess.run(
            [str(Path(sys.executable).parent / "tpchgen-cli"), "csv", "-s", SCALE, f"--output-dir={data}"],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        postgres, pg_port = start_postgres(work)
        processes.append(postgres)
        admin = f"host=127.0.0.1 port={pg_port} user=postgres"
        with psycopg.connect(f"{admin} dbname=postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE tpch")
        source = f"{admin} dbname=tpch"
        with psycopg.connect(source) as conn:
            conn.execute((HERE / "tpch" / "schema.sql").read_text())
            for table in TABLES:
                if table == "events":
                    continue
                with conn.cursor().copy(f"COPY {table} FROM STDIN WITH (FORMAT csv, HEADER)") as copy:
                    copy.write((data / f"{table}.csv").read_bytes())
            conn.execute(EVENTS)
        dump = work / "dump.sql"
        with open(dump, "w") as out:
            subprocess.run(["pg_dump", source], check=True, stdout=out)

        tablegate, tg_port = start_tablegate(binary, work)
        processes.append(tablegate)
        target = f"host=127.0.0.1 port={tg_port} user=migrator dbname=tablegate"
        if not check_restore("pg_dump output restores with psql -f", dump, target):
            return

        with psycopg.connect(source) as pg, psycopg.connect(target) as tg:
            check_same_tables("table", pg, tg)
            constraints = (
                "SELECT c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
                "JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'public' ORDER BY 1"
            )
            with pg.cursor() as a, tg.cursor() as b:
                expected = a.execute(constraints).fetchall()
                got = b.execute(constraints).fetchall()
            check("primary and foreign keys", got == expected, f"{len(got)} constraints" if got == expected else f"{got} != {expected}")

            comments = (
                "SELECT c.relname, d.objsubid, d.description FROM pg_description d "
                "JOIN pg_class c ON c.oid = d.objoid WHERE c.relname = 'events' ORDER BY 2"
            )
            check_same_rows("comments", comments, pg, tg, "comments")
            check_same_rows("enum types", ENUM_LABELS, pg, tg, "labels")

            indexes = "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public' ORDER BY 1"
            with pg.cursor() as a, tg.cursor() as b:
                expected = a.execute(indexes).fetchall()
                got = b.execute(indexes).fetchall()
                wrong = [
                    (name, b.execute(f"VERIFY INDEX {name}").fetchall()) for name, _ in got if not name.endswith("_pkey")
                ]
            detail = f"{len(got)} indexes, their entries as their tables make them"
            ok = got == expected and all(not differences for _, differences in wrong)
            check("indexes", ok, detail if ok else f"{got} != {expected}; {wrong}")

            # The serial column goes on where the source's sequence stood.
            insert = "INSERT INTO events (happened, flag) VALUES ('2026-11-21 12:00:00+00', true) RETURNING id, flag"
            with pg.cursor() as a, tg.cursor() as b:
                expected = a.execute(insert).fetchall()
                got = b.execute(insert).fetchall()
            check("serial id after the restore", got == expected, f"{got}" if got == expected else f"{got} != {expected}")

            pg_total = tg_total = 0.0
            for path in sorted((HERE / "tpch" / "queries").glob("q*.sql")):
                sql = path.read_text()
                expected, pg_time = run_query(pg, sql)
                try:
                    got, tg_time = run_query(tg, sql)
                except psycopg.Error as e:
                    tg.rollback()
                    check(f"TPC-H {path.stem}", False, str(e).strip())
                    continue
                pg_total += pg_time
                tg_total += tg_time
                same = len(got) == len(expected) and all(
                    len(g) == len(e) and all(same_value(x, y) for x, y in zip(g, e))
                    for g, e in zip(got, expected)
                )
                detail = f"{len(got)} rows, tablegate {tg_time * 1000:.0f} ms, postgres {pg_time * 1000:.0f} ms"
                if not same:
                    detail += f": got {got[:3]} expected {expected[:3]}"
                check(f"TPC-H {path.stem}", same, detail)
            print(f"TPC-H 22 queries at scale factor {SCALE}: tablegate {tg_total:.2f}s, postgres {pg_total:.2f}s in all")

        # The other way: pg_dump of the whole tablegate database (its
        # tables and the sequence a column owns; not the diagnostics
        # schema), restored into a new PostgreSQL database, which checks
        # the foreign keys as it restores them.
        exported = work / "exported.sql"
        with open(exported, "w") as out:
            dumped = subprocess.run(
                ["pg_dump", "--no-owner", target],
                stdout=out,
                stderr=subprocess.PIPE,
                text=True,
            )
        check("pg_dump of tablegate's database", dumped.returncode == 0, dumped.stderr[-2000:])
        if dumped.returncode != 0:
            return
        with psycopg.connect(f"{admin} dbname=postgres", autocommit=True) as conn:
            conn.execute("CREATE DATABASE exported")
        back = f"{admin} dbname=exported"
        if not check_restore("tablegate's dump restores into PostgreSQL 15", exported, back):
            return
        with psycopg.connect(back) as pg, psycopg.connect(target) as tg:
            check_same_tables("exported table", tg, pg)
            keys = (
                "SELECT c.conname, c.contype FROM pg_constraint c "
                "JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'public' ORDER BY 1"
            )
            check_same_rows("exported primary and foreign keys", keys, tg, pg, "constraints")
            check_same_rows("exported indexes", indexes, tg, pg, "indexes")
            check_same_rows("exported enum types", ENUM_LABELS, tg, pg, "labels")
            insert = "INSERT INTO events (happened, flag) VALUES ('2026-11-22 12:00:00+00', false) RETURNING id"
            check_same_rows("exported serial id goes on", insert, tg, pg, "rows")
    finally:
        for process in processes:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # a broken setup is a failure too
        check("migration setup", False, str(e))
    print(f"{passed} passed, {failed} failed")
    sys.exit(1 if failed else 0)
