"""psycopg, SQLAlchemy and pandas against a running tablegate.

Usage: python_clients.py PORT [TLS_PORT]
PORT serves without authentication; TLS_PORT (optional) serves with
SCRAM-SHA-256 (user alice, password s3cret) and TLS. Every check compares
what comes back with what was sent. Prints "N passed, M failed".
"""

import datetime
import decimal
import sys
import traceback
import uuid

import pandas
import psycopg
import sqlalchemy as sa

PORT = int(sys.argv[1])
TLS_PORT = int(sys.argv[2]) if len(sys.argv) > 2 else None
checks = {"passed": 0, "failed": 0}


def check(name):
    def run(f):
        try:
            f()
            checks["passed"] += 1
            print(f"ok   {name}")
        except Exception:
            checks["failed"] += 1
            print(f"FAIL {name}")
            traceback.print_exc()
        return f

    return run


def connect(**kw):
    return psycopg.connect(host="127.0.0.1", port=PORT, user="py", dbname="tablegate", **kw)


@check("psycopg: prepared statements with typed parameters round-trip")
def typed_parameters():
    values = (
        7,
        "text with 'quotes' and ünïcode",
        2**62,
        1.5e-300,
        decimal.Decimal("12345.67"),
        True,
        datetime.date(2024, 2, 29),
        datetime.datetime(2024, 2, 29, 12, 30, 45, 123456, tzinfo=datetime.timezone.utc),
        uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e"),
        b"\x00\x01\xfe\xff",
        {"a": [1, 2, {"b": None}], "c": "d"},
    )
    with connect(autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS typed")
        conn.execute(
            "CREATE TABLE typed (id int PRIMARY KEY, t text, i8 bigint, f8 double precision,"
            " n numeric(10,2), b bool, d date, ts timestamptz, u uuid, by bytea, j jsonb)"
        )
        conn.execute(
            "INSERT INTO typed VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            values[:10] + (psycopg.types.json.Jsonb(values[10]),),
            prepare=True,
        )
        for binary in (False, True):
            row = conn.cursor(binary=binary).execute(
                "SELECT * FROM typed WHERE id = %s", (7,), prepare=True
            ).fetchone()
            assert row == values, (binary, row)
        # NULL parameters and results
        conn.execute("INSERT INTO typed (id) VALUES (%s)", (8,), prepare=True)
        row = conn.execute("SELECT t, i8, j FROM typed WHERE id = %s", (8,)).fetchone()
        assert row == (None, None, None), row


@check("psycopg: parameters read as the types psycopg declares, in expressions")
def declared_parameters():
    with connect(autocommit=True) as conn:
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            row = cur.execute(
                "SELECT %s + 1, %s * 2.0, %s + 1, %s",
                (
                    decimal.Decimal("1.25"),
                    1.5,
                    datetime.date(2026, 11, 28),
                    datetime.datetime(2026, 11, 28, 10, 0, tzinfo=datetime.timezone.utc),
                ),
            ).fetchone()
            assert row == (
                decimal.Decimal("2.25"),
                3.0,
                datetime.date(2026, 11, 29),
                datetime.datetime(2026, 11, 28, 10, 0, tzinfo=datetime.timezone.utc),
            ), (binary, row)
            day = datetime.timedelta(days=1, seconds=5, microseconds=7)
            row = cur.execute(
                "SELECT %s::interval, now() - %s < now() - interval '23 hours'", (day, day)
            ).fetchone()
            assert row == (day, True), (binary, row)


@check("psycopg: dates and timestamps sent as text are read as PostgreSQL reads them")
def dated_texts():
    utc = datetime.timezone.utc
    with connect(autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS stamped")
        conn.execute("CREATE TABLE stamped (id int PRIMARY KEY, t timestamp, tz timestamptz)")
        conn.execute(
            "INSERT INTO stamped VALUES (1, %s, %s)",
            ("2024-03-01 10:00", "2024-03-01 10:00+02"),
            prepare=True,
        )
        row = conn.execute(
            "SELECT %s::timestamp, %s::timestamp, %s::timestamptz, %s::date",
            ("2024-03-01 9:30", "2024-03-01 10:00:00+02", "2024-03-01 10:00+02", "2024-02-29"),
            prepare=True,
        ).fetchone()
        assert row == (
            datetime.datetime(2024, 3, 1, 9, 30),
            datetime.datetime(2024, 3, 1, 10, 0),
            datetime.datetime(2024, 3, 1, 8, 0, tzinfo=utc),
            datetime.date(2024, 2, 29),
        ), row
        row = conn.execute(
            "SELECT id FROM stamped WHERE t = %s::timestamp AND tz = %s::timestamptz",
            ("2024-03-01 10:00", "2024-03-01 08:00Z"),
            prepare=True,
        ).fetchone()
        assert row == (1,), row


@check("psycopg: lists as array columns and parameters (= ANY, @>), in text and binary")
def arrays():
    with connect(autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS tagged")
        conn.execute("CREATE TABLE tagged (id int PRIMARY KEY, tags text[], scores int[])")
        rows = [(1, ["a", "b c", None, 'q"'], [1, 2]), (2, [], None), (3, ["x"], [7])]
        for row in rows:
            conn.execute("INSERT INTO tagged VALUES (%s, %s, %s)", row)
        for binary in (False, True):
            got = conn.cursor(binary=binary).execute("SELECT * FROM tagged ORDER BY id").fetchall()
            assert got == rows, (binary, got)
        got = conn.execute("SELECT id FROM tagged WHERE id = ANY(%s) ORDER BY id", ([1, 3, 9],)).fetchall()
        assert got == [(1,), (3,)], got
        got = conn.execute("SELECT id FROM tagged WHERE tags @> %s", (["b c"],)).fetchall()
        assert got == [(1,)], got
        conn.execute("UPDATE tagged SET scores = %s WHERE id = 2", ([5, None],))
        got = conn.execute("SELECT scores FROM tagged WHERE id = 2").fetchone()
        assert got == ([5, None],), got


@check("psycopg: uuids as parameters, lists of them and casts, in text and binary")
def uuids():
    first, second = uuid.UUID("0f8fad5b-d9cb-469f-a165-70867728950e"), uuid.uuid4()
    with connect(autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS tokens")
        conn.execute("CREATE TABLE tokens (id int PRIMARY KEY, token uuid)")
        conn.execute("INSERT INTO tokens VALUES (1, %s), (2, %s)", (first, second))
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            # psycopg writes a uuid's text without hyphens (and a list's
            # elements so): each is read as the uuid it names.
            got = cur.execute(
                "SELECT id FROM tokens WHERE token = ANY(%s) ORDER BY id", ([first, uuid.uuid4()],)
            ).fetchall()
            assert got == [(1,)], (binary, got)
            got = cur.execute("SELECT id FROM tokens WHERE token = %s", (second,)).fetchall()
            assert got == [(2,)], (binary, got)
            got = cur.execute(
                "SELECT id, %s::uuid FROM tokens WHERE token = %s::uuid", (str(first).upper(), str(first))
            ).fetchall()
            assert got == [(1, first)], (binary, got)
        try:
            conn.execute("SELECT id FROM tokens WHERE token = %s::uuid", ("not a uuid",))
            raise AssertionError("a text that names no uuid was read as one")
        except psycopg.errors.InvalidTextRepresentation:
            pass


@check("psycopg: times of day and intervals as parameters and results, in text and binary")
def times_of_day():
    opens, closes = datetime.time(9, 30), datetime.time(17, 45, 10, 250000)
    pause = datetime.timedelta(days=2, hours=3, microseconds=5)
    with connect(autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS hours")
        conn.execute("CREATE TABLE hours (id int PRIMARY KEY, opens time, closes time, pause interval)")
        conn.execute(
            "INSERT INTO hours VALUES (1, %s, %s, %s), (2, NULL, %s, NULL)", (opens, closes, pause, opens)
        )
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            got = cur.execute("SELECT opens, closes, pause FROM hours ORDER BY id").fetchall()
            assert got == [(opens, closes, pause), (None, opens, None)], (binary, got)
            got = cur.execute("SELECT id FROM hours WHERE closes > %s ORDER BY id", (datetime.time(12),)).fetchall()
            assert got == [(1,)], (binary, got)


@check("psycopg: numerics come back with PostgreSQL's digits, in text and binary")
def numerics():
    # (plain numeric, numeric(30,2)) as PostgreSQL 15 prints them.
    expected = [
        ("2.5", "2.50"),
        ("-0.001", "0.00"),
        ("18000000000000000000", "18000000000000000000.00"),
        ("0", "0.00"),
        ("-12345678.9", "-12345678.90"),
    ]
    with connect(autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS numerics")
        conn.execute(
            "CREATE TABLE numerics (id int PRIMARY KEY, plain numeric, fixed numeric(30,2))"
        )
        for i, (plain, _) in enumerate(expected):
            number = decimal.Decimal(plain)
            conn.execute("INSERT INTO numerics VALUES (%s, %s, %s)", (i, number, number))
        for binary in (False, True):
            rows = (
                conn.cursor(binary=binary)
                .execute("SELECT plain, fixed FROM numerics ORDER BY id", prepare=True)
                .fetchall()
            )
            got = [(str(plain), str(fixed)) for plain, fixed in rows]
            assert got == expected, (binary, got)


@check("psycopg: errors carry their SQLSTATE and the connection goes on")
def errors():
    with connect(autocommit=True) as conn:
        try:
            conn.execute("INSERT INTO typed (id) VALUES (7)")
            raise AssertionError("duplicate key accepted")
        except psycopg.errors.UniqueViolation:
            pass
        try:
            conn.execute("SELECT * FROM no_such_table")
            raise AssertionError("missing table accepted")
        except psycopg.errors.UndefinedTable:
            pass
        assert conn.execute("SELECT count(*) FROM typed").fetchone() == (2,)


@check("psycopg: transactions and server-side cursors")
def transactions_and_cursors():
    with connect() as conn:
        with conn.transaction():
            conn.execute("DROP TABLE IF EXISTS series")
            conn.execute("CREATE TABLE series (k int PRIMARY KEY, v int)")
            with conn.cursor() as cur:
                cur.executemany("INSERT INTO series VALUES (%s, %s)", [(k, k * k) for k in range(1, 501)])
        with conn.transaction():
            with conn.cursor(name="walk") as cur:  # DECLARE ... CURSOR, FETCH
                cur.itersize = 64
                cur.execute("SELECT k, v FROM series ORDER BY k")
                rows = list(cur)
        assert rows == [(k, k * k) for k in range(1, 501)], rows[:3]
        with conn.transaction() as outer:
            conn.execute("INSERT INTO series VALUES (1000, 0)")
            outer_rollback = False
            try:
                with conn.transaction():  # SAVEPOINT
                    conn.execute("INSERT INTO series VALUES (1, 1)")
            except psycopg.errors.UniqueViolation:
                outer_rollback = True
            assert outer_rollback
        assert conn.execute("SELECT v FROM series WHERE k = 1000").fetchone() == (0,)


@check("psycopg: server version and session functions")
def session():
    with connect() as conn:
        assert conn.info.server_version == 150000, conn.info.server_version
        row = conn.execute(
            "SELECT current_user, current_database(), current_setting('server_version_num')"
        ).fetchone()
        assert row == ("py", "tablegate", "150000"), row


ENGINE = sa.create_engine(f"postgresql+psycopg://py@127.0.0.1:{PORT}/tablegate")


@check("SQLAlchemy: reflection of tables, columns, primary and foreign keys, indexes, comments")
def reflection():
    with ENGINE.begin() as c:
        c.exec_driver_sql("DROP TABLE IF EXISTS badges")
        c.exec_driver_sql("DROP TABLE IF EXISTS employees")
        c.exec_driver_sql(
            "CREATE TABLE employees (dept text, id int, name varchar(40) NOT NULL,"
            " age int DEFAULT 30, salary numeric(10,2), PRIMARY KEY (dept, id))"
        )
    with ENGINE.begin() as c:
        c.exec_driver_sql("COMMENT ON COLUMN employees.age IS 'in years'")
        c.exec_driver_sql(
            "CREATE TABLE badges (badge serial PRIMARY KEY, dept text, emp int,"
            " FOREIGN KEY (dept, emp) REFERENCES employees)"
        )
    insp = sa.inspect(ENGINE)
    assert set(insp.get_table_names()) >= {"employees", "typed", "series"}
    columns = {c["name"]: c for c in insp.get_columns("employees")}
    assert list(columns) == ["dept", "id", "name", "age", "salary"]
    assert isinstance(columns["dept"]["type"], sa.TEXT)
    assert isinstance(columns["id"]["type"], sa.INTEGER)
    assert isinstance(columns["name"]["type"], sa.VARCHAR) and columns["name"]["type"].length == 40
    assert columns["salary"]["type"].precision == 10 and columns["salary"]["type"].scale == 2
    assert [columns[n]["nullable"] for n in columns] == [False, False, False, True, True]
    assert columns["age"]["default"] == "30"
    pk = insp.get_pk_constraint("employees")
    assert pk["constrained_columns"] == ["dept", "id"] and pk["name"] == "employees_pkey", pk
    assert insp.get_indexes("employees") == []
    assert insp.get_foreign_keys("employees") == []
    assert columns["age"]["comment"] == "in years"
    [fk] = insp.get_foreign_keys("badges")
    assert (fk["name"], fk["constrained_columns"], fk["referred_table"], fk["referred_columns"]) == (
        "badges_dept_emp_fkey", ["dept", "emp"], "employees", ["dept", "id"]), fk
    badge = {c["name"]: c for c in insp.get_columns("badges")}["badge"]
    assert badge["default"] == "nextval('badges_badge_seq'::regclass)", badge


@check("SQLAlchemy: Core round trip through a reflected table")
def core():
    meta = sa.MetaData()
    employees = sa.Table("employees", meta, autoload_with=ENGINE)
    with ENGINE.begin() as c:
        c.execute(
            employees.insert(),
            [
                {"dept": "Sales", "id": 1, "name": "Ann", "age": None, "salary": decimal.Decimal("10.50")},
                {"dept": "Sales", "id": 2, "name": "Bob", "age": 41, "salary": None},
                {"dept": "HR", "id": 7, "name": "Cy", "age": 29, "salary": None},
            ],
        )
    with ENGINE.connect() as c:
        rows = c.execute(
            sa.select(employees.c.name, employees.c.age)
            .where(employees.c.dept == "Sales")
            .order_by(employees.c.id)
        ).all()
    assert [tuple(r) for r in rows] == [("Ann", None), ("Bob", 41)], rows


@check("SQLAlchemy: create_all with an autoincrement key, inserts returning ids, drop_all")
def create_all():
    meta = sa.MetaData()
    notes = sa.Table(
        "orm_notes",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("body", sa.String(40), nullable=False),
        sa.Column("created", sa.Date, server_default=sa.text("CURRENT_DATE")),
    )
    meta.drop_all(ENGINE)
    meta.create_all(ENGINE)
    with ENGINE.begin() as c:
        first = c.execute(notes.insert().returning(notes.c.id), {"body": "a"}).scalar_one()
        more = c.execute(notes.insert().returning(notes.c.id), [{"body": "b"}, {"body": "c"}]).scalars().all()
    assert (first, sorted(more)) == (1, [2, 3]), (first, more)
    with ENGINE.connect() as c:
        bodies = c.execute(sa.select(notes.c.body).order_by(notes.c.id)).scalars().all()
    assert bodies == ["a", "b", "c"], bodies
    meta.drop_all(ENGINE)
    assert "orm_notes" not in sa.inspect(ENGINE).get_table_names()


@check("pandas: read_sql with PostgreSQL's column names and types")
def pandas_read_sql():
    frame = pandas.read_sql(
        "SELECT dept, count(*), avg(age), max(salary) FROM employees GROUP BY dept ORDER BY dept",
        ENGINE,
    )
    assert list(frame.columns) == ["dept", "count", "avg", "max"], list(frame.columns)
    assert frame["dept"].tolist() == ["HR", "Sales"]
    assert frame["count"].tolist() == [1, 2]
    assert frame["avg"].tolist()[0] == 29.0
    assert frame["max"].tolist()[1] == decimal.Decimal("10.50")
    frame = pandas.read_sql(sa.text("SELECT k, v FROM series WHERE k <= :n ORDER BY k"), ENGINE, params={"n": 3})
    assert frame.to_dict("list") == {"k": [1, 2, 3], "v": [1, 4, 9]}


if TLS_PORT is not None:

    @check("psycopg: SCRAM-SHA-256 over TLS; a wrong password is refused")
    def scram_tls():
        with psycopg.connect(
            host="127.0.0.1", port=TLS_PORT, user="alice", password="s3cret", sslmode="require"
        ) as conn:
            assert conn.pgconn.ssl_in_use
            assert conn.execute("SELECT current_user").fetchone() == ("alice",)
        try:
            psycopg.connect(host="127.0.0.1", port=TLS_PORT, user="alice", password="nope", sslmode="require")
            raise AssertionError("wrong password accepted")
        except psycopg.OperationalError as e:
            assert "authentication failed" in str(e), e


print(f"{checks['passed']} passed, {checks['failed']} failed")
sys.exit(1 if checks["failed"] else 0)
