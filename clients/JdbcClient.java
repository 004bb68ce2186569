// pgJDBC against a running tablegate: DatabaseMetaData and ResultSetMetaData,
// with what comes back checked. Usage: java -cp postgresql.jar:. JdbcClient PORT
// Prints "N passed, M failed".

import java.sql.*;
import java.util.*;

public class JdbcClient {
    static int passed = 0, failed = 0;

    interface Check { void run() throws Exception; }

    static void check(String name, Check c) {
        try {
            c.run();
            passed++;
            System.out.println("ok   " + name);
        } catch (Throwable t) {
            failed++;
            System.out.println("FAIL " + name + ": " + t);
        }
    }

    static void expect(boolean ok, String what) {
        if (!ok) throw new AssertionError(what);
    }

    static List<String> column(ResultSet rs, String name) throws SQLException {
        List<String> out = new ArrayList<>();
        while (rs.next()) out.add(rs.getString(name));
        return out;
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/tablegate";
        Properties props = new Properties();
        props.setProperty("user", "jdbc");
        try (Connection conn = DriverManager.getConnection(url, props)) {
            try (Statement st = conn.createStatement()) {
                st.execute("DROP TABLE IF EXISTS badges");
                st.execute("DROP TABLE IF EXISTS employees");
                st.execute("CREATE TABLE employees (dept text, id int, name varchar(40) NOT NULL,"
                        + " age int DEFAULT 30, salary numeric(10,2), hired date, PRIMARY KEY (dept, id))");
                st.execute("COMMENT ON TABLE employees IS 'who works here'");
                st.execute("CREATE INDEX employees_hired ON employees (hired)");
                st.execute("CREATE TABLE badges (badge serial PRIMARY KEY, dept text, emp int,"
                        + " FOREIGN KEY (dept, emp) REFERENCES employees)");
            }
            DatabaseMetaData md = conn.getMetaData();

            check("getDatabaseProductVersion", () -> {
                expect(md.getDatabaseProductName().equals("PostgreSQL"), md.getDatabaseProductName());
                expect(md.getDatabaseMajorVersion() == 15, md.getDatabaseProductVersion());
            });
            check("getSchemas", () -> {
                List<String> schemas = column(md.getSchemas(), "TABLE_SCHEM");
                expect(schemas.contains("public"), schemas.toString());
            });
            check("getTables", () -> {
                ResultSet rs = md.getTables(null, "public", "emp%", new String[] {"TABLE"});
                List<String> tables = new ArrayList<>();
                while (rs.next()) tables.add(rs.getString("TABLE_SCHEM") + "." + rs.getString("TABLE_NAME") + ":" + rs.getString("TABLE_TYPE"));
                expect(tables.equals(List.of("public.employees:TABLE")), tables.toString());
                List<String> all = column(md.getTables(null, null, "%", new String[] {"TABLE"}), "TABLE_NAME");
                expect(all.contains("employees") && !all.contains("pg_class"), all.toString());
            });
            check("getColumns", () -> {
                ResultSet rs = md.getColumns(null, "public", "employees", "%");
                List<String> seen = new ArrayList<>();
                while (rs.next()) {
                    seen.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME") + ":"
                            + rs.getInt("COLUMN_SIZE") + ":" + rs.getString("IS_NULLABLE") + ":"
                            + rs.getString("COLUMN_DEF"));
                }
                expect(seen.equals(List.of(
                        "dept:text:2147483647:NO:null",
                        "id:int4:10:NO:null",
                        "name:varchar:40:NO:null",
                        "age:int4:10:YES:30",
                        "salary:numeric:10:YES:null",
                        "hired:date:13:YES:null")), seen.toString());
            });
            check("getPrimaryKeys", () -> {
                ResultSet rs = md.getPrimaryKeys(null, "public", "employees");
                List<String> keys = new ArrayList<>();
                while (rs.next()) keys.add(rs.getString("COLUMN_NAME") + "@" + rs.getInt("KEY_SEQ") + ":" + rs.getString("PK_NAME"));
                expect(keys.equals(List.of("dept@1:employees_pkey", "id@2:employees_pkey")), keys.toString());
            });
            check("getIndexInfo", () -> {
                ResultSet rs = md.getIndexInfo(null, "public", "employees", false, false);
                List<String> cols = new ArrayList<>();
                while (rs.next()) cols.add(rs.getString("INDEX_NAME") + ":" + rs.getString("COLUMN_NAME") + ":" + rs.getBoolean("NON_UNIQUE"));
                expect(cols.equals(List.of("employees_pkey:dept:false", "employees_pkey:id:false", "employees_hired:hired:true")), cols.toString());
            });
            check("getImportedKeys, getExportedKeys and REMARKS", () -> {
                List<String> keys = new ArrayList<>();
                for (ResultSet rs : List.of(md.getImportedKeys(null, "public", "badges"),
                        md.getExportedKeys(null, "public", "employees"))) {
                    while (rs.next()) {
                        keys.add(rs.getString("FKTABLE_NAME") + "." + rs.getString("FKCOLUMN_NAME") + "->"
                                + rs.getString("PKTABLE_NAME") + "." + rs.getString("PKCOLUMN_NAME") + "@"
                                + rs.getInt("KEY_SEQ") + ":" + rs.getString("FK_NAME") + ":" + rs.getString("PK_NAME"));
                    }
                }
                String key = "badges.dept->employees.dept@1:badges_dept_emp_fkey:employees_pkey";
                String key2 = "badges.emp->employees.id@2:badges_dept_emp_fkey:employees_pkey";
                expect(keys.equals(List.of(key, key2, key, key2)), keys.toString());
                ResultSet rs = md.getTables(null, "public", "employees", null);
                expect(rs.next() && "who works here".equals(rs.getString("REMARKS")), "REMARKS");
            });
            check("sequences through the extended protocol", () -> {
                try (Statement st = conn.createStatement()) {
                    st.execute("DROP SEQUENCE IF EXISTS jdbc_seq");
                    st.execute("CREATE SEQUENCE jdbc_seq START WITH 5 INCREMENT BY 2");
                    st.execute("ALTER SEQUENCE jdbc_seq OWNED BY NONE");
                    ResultSet rs = st.executeQuery("SELECT nextval('jdbc_seq'), nextval('jdbc_seq')");
                    expect(rs.next() && rs.getLong(1) == 5 && rs.getLong(2) == 7, "nextval");
                }
            });
            check("getTypeInfo", () -> {
                List<String> types = column(md.getTypeInfo(), "TYPE_NAME");
                expect(types.containsAll(List.of("int4", "int8", "text", "varchar", "numeric", "bool", "date", "timestamptz", "uuid")), types.toString());
            });
            check("prepared statements and ResultSetMetaData", () -> {
                try (PreparedStatement ins = conn.prepareStatement("INSERT INTO employees VALUES (?, ?, ?, ?, ?, ?)")) {
                    ins.setString(1, "Sales"); ins.setInt(2, 1); ins.setString(3, "Ann");
                    ins.setInt(4, 34); ins.setBigDecimal(5, new java.math.BigDecimal("10.50"));
                    ins.setDate(6, java.sql.Date.valueOf("2024-02-29"));
                    expect(ins.executeUpdate() == 1, "insert count");
                }
                try (PreparedStatement q = conn.prepareStatement("SELECT name, age, salary, hired, count(*) OVER () FROM employees WHERE dept = ? AND id = ?")) {
                    q.setString(1, "Sales"); q.setInt(2, 1);
                    ResultSet rs = q.executeQuery();
                    ResultSetMetaData m = rs.getMetaData();
                    expect(m.getColumnCount() == 5, "columns");
                    expect(m.getColumnName(1).equals("name") && m.getColumnTypeName(1).equals("varchar"), m.getColumnTypeName(1));
                    expect(m.getColumnType(2) == Types.INTEGER, "age type");
                    expect(m.getColumnType(3) == Types.NUMERIC, "salary type");
                    expect(m.getColumnType(4) == Types.DATE, "hired type");
                    expect(m.getColumnName(5).equals("count"), m.getColumnName(5));
                    expect(rs.next(), "a row");
                    expect(rs.getString(1).equals("Ann") && rs.getInt(2) == 34, "values");
                    expect(rs.getBigDecimal(3).equals(new java.math.BigDecimal("10.50")), rs.getBigDecimal(3).toString());
                    expect(rs.getDate(4).toString().equals("2024-02-29"), rs.getDate(4).toString());
                }
            });
            check("uuid, time and interval parameters and values, prepared past the threshold", () -> {
                java.util.UUID token = java.util.UUID.fromString("0f8fad5b-d9cb-469f-a165-70867728950e");
                try (Statement st = conn.createStatement()) {
                    st.execute("DROP TABLE IF EXISTS visits");
                    st.execute("CREATE TABLE visits (id int PRIMARY KEY, token uuid, arrives time, stays interval)");
                }
                try (PreparedStatement ins = conn.prepareStatement("INSERT INTO visits VALUES (?, ?, ?, ?::interval)")) {
                    ins.setInt(1, 1); ins.setObject(2, token);
                    ins.setTime(3, java.sql.Time.valueOf("09:45:30")); ins.setString(4, "1 day 02:30:00");
                    expect(ins.executeUpdate() == 1, "insert count");
                }
                // pgJDBC switches to a named statement and binary results after
                // five executions.
                try (PreparedStatement q = conn.prepareStatement("SELECT id, arrives, stays, token FROM visits WHERE token = ?")) {
                    for (int i = 0; i < 7; i++) {
                        q.setObject(1, token);
                        ResultSet rs = q.executeQuery();
                        expect(rs.next(), "a row at execution " + i);
                        expect(rs.getInt(1) == 1, "id");
                        expect(rs.getTime(2).toString().equals("09:45:30"), rs.getTime(2).toString());
                        expect(rs.getString(3).equals("1 day 02:30:00"), rs.getString(3));
                        expect(token.equals(rs.getObject(4)), String.valueOf(rs.getObject(4)));
                        expect(!rs.next(), "one row");
                    }
                }
            });
            check("fetch size reads through a portal in pieces", () -> {
                conn.setAutoCommit(false);
                try (Statement st = conn.createStatement()) {
                    st.setFetchSize(2);
                    ResultSet rs = st.executeQuery("SELECT x FROM generate_series(1, 7) AS t(x)");
                    int n = 0;
                    while (rs.next()) n += rs.getInt(1);
                    expect(n == 28, "sum " + n);
                }
                conn.commit();
                conn.setAutoCommit(true);
            });
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }
}
