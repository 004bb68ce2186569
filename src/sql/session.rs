//! A SQL session: one client connection's DataFusion context, settings and
//! transaction, and the dispatch of each statement to DataFusion (queries) or
//! to tablegate's own DDL and DML.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::{CatalogProvider, MemoryCatalogProvider};
use datafusion::common::ParamValues;
use datafusion::execution::SessionStateBuilder;
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::SendableRecordBatchStream;
use datafusion::prelude::{SessionConfig, SessionContext};
use datafusion::sql::parser::Statement as DfStatement;
use datafusion::sql::sqlparser::ast::{
    AlterIndexOperation, CopyLegacyOption, CopyOption, CopySource, CopyTarget, Ident, ObjectName,
    Statement,
};
use datafusion::sql::sqlparser::dialect::PostgreSqlDialect;

use super::copy::{CopyFormat, CopyIn};
use super::cursor::{self, Cursor};
use super::diagnostics;
use super::error::{Result, SqlError};
use super::fastpath::{KeyPlan, StoredRows};
use super::names::ColumnNames;
use super::provider::{ReadView, TablegateSchema};
use super::settings::{Refused, Settings};
use super::txn::{Change, Transaction};
use super::{
    ddl, dml, foreign_keys, functions, information_schema, names, pg_catalog, records, rewrite,
};
use crate::catalog::{Catalog, CatalogError, DefinitionChange, TableDef};
use crate::model::EntityKey;
use crate::store::{LoadRows, StoreError, TableStore, ROWS_PER_SPILLED_PART};

pub const CATALOG_NAME: &str = "tablegate";
pub const SCHEMA_NAME: &str = "public";

/// Memory all running queries may hold at once, by default: past it, a
/// sort spills to disk and what cannot spill (a hash join's table, a
/// grouping) fails with SQLSTATE 53200 instead of taking the machine down.
pub const DEFAULT_QUERY_MEMORY: usize = 4 << 30;

/// What every session of a server shares.
pub struct Engine {
    pub catalog: Arc<Catalog>,
    /// Traffic, recent queries and checks (the `tablegate` schema).
    pub monitor: Arc<diagnostics::Monitor>,
    /// DataFusion's runtime: the memory pool every query draws from.
    runtime: Arc<datafusion::execution::runtime_env::RuntimeEnv>,
    /// The runtime the engine was opened on (in the server, the
    /// multi-threaded one), which runs query plans and column copies;
    /// connections may be served by runtimes of one thread.
    tasks: tokio::runtime::Handle,
    /// Column copies of tables for whole-table scans, when the store has
    /// local storage for them.
    copies: Option<Arc<super::columnar::ColumnCopies>>,
}

impl Engine {
    pub async fn open(store: Arc<dyn TableStore>) -> Result<Arc<Engine>> {
        Engine::open_with_memory(store, DEFAULT_QUERY_MEMORY).await
    }

    /// An engine whose queries hold at most `query_memory` bytes together.
    pub async fn open_with_memory(
        store: Arc<dyn TableStore>,
        query_memory: usize,
    ) -> Result<Arc<Engine>> {
        let runtime = datafusion::execution::runtime_env::RuntimeEnvBuilder::new()
            .with_memory_limit(query_memory, 1.0)
            .build_arc()?;
        let tasks = tokio::runtime::Handle::current();
        // Without their directory, scans read the store.
        let copies = store.derived_files_dir().and_then(|dir| {
            super::columnar::ColumnCopies::open(&dir, store.clone(), tasks.clone())
                .inspect_err(|e| {
                    tracing::warn!(
                        "no column copies of tables: cannot make {}: {e}",
                        dir.display()
                    )
                })
                .ok()
                .map(Arc::new)
        });
        let shared = store.shared();
        let engine = Arc::new(Engine {
            catalog: Arc::new(Catalog::open(store).await?),
            monitor: Arc::default(),
            runtime,
            tasks,
            copies,
        });
        // No session is left from before: their temporary tables go. Over
        // a shared store, other gateways' sessions may be using theirs.
        if !shared {
            engine.drop_temporary_tables(None).await?;
        }
        Ok(engine)
    }

    /// Drops the temporary tables of the session marked `owner`, or all
    /// of them (`None`), each only while it is still that session's.
    pub async fn drop_temporary_tables(self: &Arc<Self>, owner: Option<&str>) -> Result<()> {
        let owned = |def: &TableDef| match (&def.temporary, owner) {
            (Some(mark), Some(owner)) => mark == owner,
            (Some(_), None) => true,
            (None, _) => false,
        };
        let names: Vec<String> = self
            .catalog
            .list()
            .iter()
            .filter(|def| owned(def))
            .map(|def| def.name.clone())
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        let mut session = Session::new(self.clone());
        session.open_implicit();
        let mut result = Ok(());
        for name in names {
            // Read again in the transaction, whose commit checks it still is.
            let Some(def) = session.table_def(&name).filter(|def| owned(def)) else {
                continue;
            };
            let kind = ddl::Relation::of(&def);
            let name = ObjectName::from(vec![Ident::with_quote('"', name)]);
            result = ddl::drop_relations(&mut session, kind, &[name], true, true).map(|_| ());
            if result.is_err() {
                break;
            }
        }
        session.close_implicit(result.is_ok()).await?;
        result
    }

    /// At a clean stop, after the connections: sequences go on from their
    /// last values after a restart. Over a shared store, which other
    /// gateways' sequences write too, only values logged ahead are stored.
    pub async fn close(&self) {
        if self.store().shared() {
            return;
        }
        if let Err(e) = self.catalog.sequences.close().await {
            tracing::warn!("the sequences' last values were not stored: {e}");
        }
    }

    pub fn store(&self) -> &Arc<dyn TableStore> {
        self.catalog.store()
    }

    /// Plans a query and runs it on the engine's runtime, so that its
    /// partitions and the tasks DataFusion spawns use every core whichever
    /// thread reads the rows. Each batch is computed when the reader asks
    /// for it, as if it polled the plan itself (a cursor reads its rows at
    /// FETCH); when the reader drops the stream, the plan stops.
    pub(super) async fn execute(
        &self,
        frame: datafusion::prelude::DataFrame,
    ) -> Result<(
        Arc<dyn datafusion::physical_plan::ExecutionPlan>,
        SendableRecordBatchStream,
    )> {
        use datafusion::error::DataFusionError;
        use futures::{FutureExt, StreamExt};
        use tokio::sync::{mpsc, oneshot};
        type Batch = datafusion::error::Result<datafusion::arrow::array::RecordBatch>;
        let task = Arc::new(frame.task_ctx());
        let plan = frame.create_physical_plan().await?;
        // Tasks DataFusion spawns while it builds the stream go there too.
        let mut stream = {
            let _runtime = self.tasks.enter();
            datafusion::physical_plan::execute_stream(plan.clone(), task)?
        };
        let schema = stream.schema();
        let (asks, mut asked) = mpsc::channel::<oneshot::Sender<Option<Batch>>>(1);
        self.tasks.spawn(async move {
            while let Some(mut reply) = asked.recv().await {
                let next = std::panic::AssertUnwindSafe(stream.next()).catch_unwind();
                let (batch, end) = tokio::select! {
                    _ = reply.closed() => return,
                    batch = next => match batch {
                        Ok(batch) => {
                            let end = batch.is_none();
                            (batch, end)
                        }
                        Err(panic) => (Some(Err(SqlError::of_panic(panic).into())), true),
                    },
                };
                if reply.send(batch).is_err() || end {
                    return;
                }
            }
        });
        let batches = futures::stream::unfold(Some(asks), |asks| async move {
            let asks = asks?;
            let (reply, answer) = oneshot::channel();
            asks.send(reply).await.ok()?;
            match answer.await {
                Ok(Some(batch)) => Some((batch, Some(asks))),
                Ok(None) => None,
                // The task ended without an answer.
                Err(_) => Some((
                    Err(DataFusionError::Execution(
                        "the query's execution stopped unexpectedly".into(),
                    )),
                    None,
                )),
            }
        });
        Ok((
            plan,
            Box::pin(
                datafusion::physical_plan::stream::RecordBatchStreamAdapter::new(schema, batches),
            ),
        ))
    }
}

impl Output {
    /// Rows already in memory.
    pub fn from_batches(
        schema: SchemaRef,
        batches: Vec<datafusion::arrow::array::RecordBatch>,
        tag: &str,
    ) -> Result<Output> {
        let stream = datafusion::physical_plan::memory::MemoryStream::try_new(
            batches,
            schema.clone(),
            None,
        )?;
        Ok(Output::Rows {
            schema,
            stream: Box::pin(stream),
            tag: tag.into(),
        })
    }

    /// The output with the rows of a read by key decoded into a record
    /// batch, for readers of [`Output::Rows`].
    pub fn decoded(self) -> Result<Output> {
        match self {
            Output::Stored(rows) => Ok(Output::Rows {
                schema: rows.schema().clone(),
                stream: rows.into_stream()?,
                tag: "SELECT".into(),
            }),
            output => Ok(output),
        }
    }

    /// The output with its rows read: an error raised while they are
    /// produced is the statement's. A text of several statements reads
    /// each one's so before the next runs, as PostgreSQL runs them in turn
    /// and stops at the first error (their rows are held in memory).
    async fn produced(self) -> Result<Output> {
        match self {
            Output::Rows {
                schema,
                stream,
                tag,
            } => {
                let batches: Vec<_> = futures::TryStreamExt::try_collect(stream).await?;
                Output::from_batches(schema, batches, &tag)
            }
            output => Ok(output),
        }
    }
}

/// What a statement returns.
pub enum Output {
    /// Rows, and the command tag to report with their count (`SELECT`, or
    /// `INSERT 0` for INSERT ... RETURNING).
    Rows {
        schema: SchemaRef,
        stream: SendableRecordBatchStream,
        tag: String,
    },
    /// The rows of a read by key (`SELECT`), as the store holds them.
    Stored(StoredRows),
    /// A command tag such as `INSERT 0 3` or `CREATE TABLE`.
    Command(String),
    /// The statement opened or closed a transaction block.
    TransactionStart(String),
    TransactionEnd(String),
    /// COPY FROM STDIN: the client now sends the data ([`Session::copy_data`]).
    CopyIn {
        columns: usize,
    },
    /// COPY TO STDOUT: these rows, in this format.
    CopyOut {
        schema: SchemaRef,
        stream: SendableRecordBatchStream,
        format: CopyFormat,
    },
}

/// What the session keeps of a statement prepared with SQL's `PREPARE`
/// (DataFusion keeps a query's plan).
struct PreparedQuery {
    /// The names of its result's columns, when it is a query.
    names: Option<ColumnNames>,
    /// The types its parameters are declared as.
    parameter_types: Vec<Option<DataType>>,
}

impl PreparedQuery {
    /// Makes the texts `EXECUTE` gives it ones Arrow reads as its
    /// parameters' types, as a literal cast to them is (DataFusion casts
    /// them with Arrow's cast, which takes fewer forms than PostgreSQL).
    fn read_texts(
        &self,
        parameters: &mut [datafusion::sql::sqlparser::ast::Expr],
        zone: &super::time_zone::SessionZone,
    ) {
        use datafusion::sql::sqlparser::ast::{Expr, Value};
        for (parameter, ty) in parameters.iter_mut().zip(&self.parameter_types) {
            let read = ty.as_ref().and_then(super::types::text_reader);
            if let (Expr::Value(v), Some(read)) = (parameter, read) {
                if let Value::SingleQuotedString(text) = &mut v.value {
                    *text = read(text, zone).into_owned();
                }
            }
        }
    }
}

/// The name of a statement that SQL's `EXECUTE` runs, as PostgreSQL
/// folds it.
fn executed_name(name: &datafusion::sql::sqlparser::ast::ObjectName) -> Option<String> {
    name.0
        .last()
        .and_then(|part| part.as_ident())
        .map(normalize)
}

/// A statement parsed and planned once, executed many times (the extended
/// protocol's prepared statement).
#[derive(Clone)]
pub struct Prepared {
    pub sql: Arc<str>,
    pub statement: Option<DfStatement>,
    /// For queries: the plan, with placeholders for the parameters.
    pub plan: Option<LogicalPlan>,
    /// The types of `$1`, `$2`, ...; `None` where nothing determines one.
    pub param_types: Vec<Option<DataType>>,
    /// Columns of the result, if the statement returns rows.
    pub result: Option<SchemaRef>,
    /// Set when the statement is a read by key that skips planning.
    by_key: Option<Arc<KeyPlan>>,
    /// PostgreSQL's names of the result columns, where they differ.
    names: Option<Vec<Option<String>>>,
    /// A statement the SQL parser does not read (see `ddl::text_command`),
    /// run from its text.
    text_command: bool,
    /// For INSERT, UPDATE and DELETE: the statement's rewrite.
    kept: dml::KeptRewrite,
}

impl Prepared {
    /// Whether executions skip planning (a read by key of one partition).
    pub fn skips_planning(&self) -> bool {
        self.by_key.is_some()
    }
}

/// What passes between a session and its connection besides a statement's
/// own result, both ways, after the statement has returned: notices for the
/// client (a query's rows, read later, end with its density warning), and
/// word from the connection that it sent the client an error (one raised
/// while rows were read), which fails the open transaction as any error
/// does in PostgreSQL.
#[derive(Clone, Default)]
pub struct Notices(Arc<std::sync::Mutex<NoticeQueue>>);

#[derive(Default)]
struct NoticeQueue {
    pending: Vec<String>,
    error_sent: bool,
    /// When each warning topic was last sent, so a busy table warns once a
    /// minute rather than on every statement.
    warned: HashMap<String, std::time::Instant>,
}

impl Notices {
    fn queue(&self) -> std::sync::MutexGuard<'_, NoticeQueue> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn push(&self, message: String) {
        self.queue().pending.push(message);
    }

    /// Adds a warning unless its topic was warned of in the last minute.
    pub fn warn(&self, topic: &str, message: String) {
        let mut queue = self.queue();
        let now = std::time::Instant::now();
        if let Some(at) = queue.warned.get(topic) {
            if now.duration_since(*at) < std::time::Duration::from_secs(60) {
                return;
            }
        }
        tracing::warn!("{message}");
        queue.warned.insert(topic.to_owned(), now);
        queue.pending.push(message);
    }

    /// The notices not yet sent.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut self.queue().pending)
    }

    /// The connection sent the client an error.
    pub fn error_sent(&self) {
        self.queue().error_sent = true;
    }

    fn take_error_sent(&self) -> bool {
        std::mem::take(&mut self.queue().error_sent)
    }
}

pub struct Session {
    engine: Arc<Engine>,
    ctx: SessionContext,
    view: Arc<ReadView>,
    pub(super) txn: Option<Transaction>,
    settings: Settings,
    /// A COPY FROM STDIN receiving data, or the error that ended it.
    copy_in: Option<Result<CopyIn>>,
    /// The COPY FROM STDIN under way, as column copies see it.
    loading: Option<super::columnar::Loading>,
    /// Open cursors, by name.
    cursors: HashMap<String, Cursor>,
    /// Notices for the client, sent with the next replies.
    notices: Notices,
    /// The text of the statement running, for the query log.
    statement_text: Arc<str>,
    /// When it started, for `statement_timeout`.
    statement_started: tokio::time::Instant,
    /// The role made with SQL the session runs as, whose grants limit it;
    /// `None` for a superuser.
    role: Option<String>,
    /// Statements prepared before, by their text: those that read by key
    /// (kept while their table's definition stays), `None` for the others.
    /// Clients that prepare each statement again (an unnamed statement of
    /// the extended protocol) and queries sent with literals (in their
    /// text with parameters in the literals' place) skip planning here.
    key_reads: HashMap<Arc<str>, Option<Arc<Prepared>>>,
    /// Shapes of query texts (their literals taken out) that were reads by
    /// key, and the statements they run as.
    key_shapes: HashMap<String, Vec<ShapedRead>>,
    /// INSERT, UPDATE and DELETE statements prepared with SQL's `PREPARE`,
    /// by name (DataFusion keeps the queries).
    prepared_writes: HashMap<String, Arc<Prepared>>,
    /// What the session keeps of statements prepared with SQL's `PREPARE`.
    prepared_queries: HashMap<String, PreparedQuery>,
    /// The RETURNING rows of the writing parts of the statement running.
    pub(super) statement_tables: super::writing_ctes::StatementTables,
    /// The session's mark on the temporary tables it makes, and their names.
    temporary: (String, Vec<String>),
}

/// The statement that query texts of one shape run as, when their literals
/// other than its parameters have these values (`LIMIT 10` is part of the
/// statement, `id = 5` a parameter).
struct ShapedRead {
    /// Which of the text's literals are the parameters, in order.
    params: Vec<usize>,
    /// The text's other literals and their values.
    fixed: Vec<(usize, datafusion::common::ScalarValue)>,
    prepared: Arc<Prepared>,
}

/// Statements a session keeps for one shape of text.
const MAX_SHAPED_READS: usize = 8;

/// Texts a session remembers in `key_reads` (shapes of texts in
/// `key_shapes`) before it forgets them all.
const MAX_KEY_READS: usize = 256;

impl Drop for Session {
    /// The session's temporary tables go with it, in a task of their own
    /// (dropping them commits to the catalog).
    fn drop(&mut self) {
        let (mark, names) = &self.temporary;
        if names.is_empty() {
            return;
        }
        let (engine, mark) = (self.engine.clone(), mark.clone());
        self.engine.tasks.spawn(async move {
            if let Err(e) = engine.drop_temporary_tables(Some(&mark)).await {
                tracing::warn!("could not drop a closed session's temporary tables: {e}");
            }
        });
    }
}

/// A mark for one session's temporary tables, unique across sessions and
/// gateways: this process's start, its id, and the session's number.
fn temporary_owner() -> String {
    static PROCESS: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let process = PROCESS.get_or_init(|| {
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos();
        format!("{started:x}.{}", std::process::id())
    });
    let session = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{process}.{session}")
}

/// A number for each session, reported by `pg_backend_pid()`.
fn next_backend_pid() -> i32 {
    static NEXT: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// How often an autocommit statement is re-run after losing a race with a
/// concurrent writer before it reports a serialization failure.
const MAX_RETRIES: usize = 100;

/// A cheap random number below `n` (for backoff jitter; not for anything secret).
fn rand_below(n: u64) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(n);
    h.finish() % n.max(1)
}

impl Session {
    pub fn new(engine: Arc<Engine>) -> Self {
        Session::for_user(engine, pg_catalog::OWNER)
    }

    /// A session of the user a client logged in as (what `current_user` says).
    pub fn for_user(engine: Arc<Engine>, user: &str) -> Self {
        let settings = Settings::for_user(user);
        let config = SessionConfig::new()
            .with_default_catalog_and_schema(CATALOG_NAME, SCHEMA_NAME)
            .with_create_default_catalog_and_schema(false)
            .with_information_schema(false)
            .with_target_partitions(2)
            .set_str("datafusion.sql_parser.dialect", "postgres")
            // `2.5` is a numeric, as in PostgreSQL.
            .set_bool("datafusion.sql_parser.parse_float_as_decimal", true)
            .set_str("datafusion.execution.time_zone", super::types::UTC)
            // A scan takes a hash join's dynamic filter to read only the
            // keys the join's other side holds, waiting until that side
            // is read (see `scan::key_lookup`). The filters an aggregate's
            // min / max or a TopK make are never complete before the scan
            // has given its rows: a scan that took one waited for ever
            // (`SELECT max(id) FROM t` of a key never answered). A scan
            // prunes nothing with them, so they are not made.
            .set_bool(
                "datafusion.optimizer.enable_aggregate_dynamic_filter_pushdown",
                false,
            )
            .set_bool(
                "datafusion.optimizer.enable_topk_dynamic_filter_pushdown",
                false,
            );
        let state = SessionStateBuilder::new()
            .with_config(config)
            .with_runtime_env(engine.runtime.clone())
            .with_default_features()
            .with_type_planner(Arc::new(super::types::PostgresTypes))
            .with_analyzer_rule(Arc::new(super::casts::PostgresCasts(settings.clone())))
            .with_analyzer_rule(Arc::new(super::arithmetic::PostgresArithmetic))
            .build();
        let ctx = SessionContext::new_with_state(state);
        let view = Arc::new(ReadView::new(settings.clone()));
        let catalog = MemoryCatalogProvider::new();
        let shown = settings.clone();
        let system: Arc<dyn datafusion::catalog::SchemaProvider> =
            Arc::new(pg_catalog::PgCatalogSchema::new(
                engine.catalog.clone(),
                view.clone(),
                Arc::new(move || shown.all()),
            ));
        let _ = catalog.register_schema(pg_catalog::SCHEMA, system.clone());
        let _ = catalog.register_schema(
            information_schema::SCHEMA,
            Arc::new(information_schema::InformationSchema::new(
                engine.catalog.clone(),
                view.clone(),
            )),
        );
        let _ = catalog.register_schema(
            diagnostics::SCHEMA,
            Arc::new(diagnostics::DiagnosticsSchema::new(
                engine.catalog.clone(),
                engine.store().clone(),
                view.clone(),
                engine.monitor.clone(),
                engine.copies.clone(),
            )),
        );
        let statement_tables = super::writing_ctes::StatementTables::default();
        let _ = catalog.register_schema(super::writing_ctes::SCHEMA, statement_tables.schema());
        let _ = catalog.register_schema(
            SCHEMA_NAME,
            Arc::new(TablegateSchema::new(
                engine.catalog.clone(),
                engine.store().clone(),
                view.clone(),
                system,
                engine.monitor.traffic.clone(),
                engine.copies.clone(),
            )),
        );
        ctx.register_catalog(CATALOG_NAME, Arc::new(catalog));
        functions::register_all(
            &ctx,
            settings.clone(),
            engine.catalog.clone(),
            view.clone(),
            user,
            next_backend_pid(),
        );
        let role = engine.catalog.roles.get(user).map(|r| r.name);
        view.set_role(role.clone());
        Session {
            engine,
            ctx,
            view,
            txn: None,
            settings,
            copy_in: None,
            loading: None,
            cursors: HashMap::new(),
            notices: Notices::default(),
            statement_text: Arc::from(""),
            statement_started: tokio::time::Instant::now(),
            role,
            key_reads: HashMap::new(),
            key_shapes: HashMap::new(),
            prepared_writes: HashMap::new(),
            prepared_queries: HashMap::new(),
            statement_tables,
            temporary: (temporary_owner(), Vec::new()),
        }
    }

    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Makes `name` one of the session's temporary tables, dropped when it
    /// ends; returns the mark its definition carries.
    pub(super) fn own_temporary_table(&mut self, name: &str) -> String {
        let (mark, names) = &mut self.temporary;
        if !names.iter().any(|n| n == name) {
            names.push(name.to_owned());
        }
        mark.clone()
    }

    /// Adds a notice for the client.
    pub(super) fn notice(&self, message: String) {
        self.notices.push(message);
    }

    /// The session's notices, which the protocol layer sends.
    pub fn notices(&self) -> Notices {
        self.notices.clone()
    }

    /// The session's parameters (shared: a change is seen by every holder).
    pub fn settings(&self) -> Settings {
        self.settings.clone()
    }

    /// The logical plan of one statement given as text (a view's query,
    /// the query of CREATE TABLE AS, the SELECT a write plans).
    pub(super) async fn plan_query(&self, sql: &str) -> Result<LogicalPlan> {
        let statement = Self::parse(sql)?
            .pop()
            .ok_or_else(|| SqlError::Syntax("empty query".into()))?;
        self.to_plan(statement).await
    }

    /// `plan` with its parameters' values, each text compared with an
    /// enum column checked as a label (22P02), as a literal is when the
    /// statement is planned.
    pub(super) fn bind(&self, plan: LogicalPlan, params: ParamValues) -> Result<LogicalPlan> {
        let plan = plan.with_param_values(params)?;
        let types = &self.engine.catalog.types;
        if !types.is_empty() {
            super::enums::check_labels_compared(&plan, types)?;
        }
        Ok(plan)
    }

    /// A statement's logical plan, each parameter with one type (see
    /// [`super::parameters`]; `x = ANY($1)`'s an array, see
    /// [`super::arrays::typed_any_parameters`]), literals typed as PostgreSQL types
    /// them (see [`super::arithmetic`]) and sums of bigints exact (see
    /// [`super::sums`]).
    pub(super) async fn to_plan(&self, mut statement: DfStatement) -> Result<LogicalPlan> {
        if let DfStatement::Statement(s) = &mut statement {
            super::views::expand(s, &|name| {
                self.table_def(name).filter(|def| def.plain_view.is_some())
            })?;
            self.expand_whole_rows(s).await;
            let tables = |table: &str| {
                self.table_def(table).map(|def| super::correlated::Shape {
                    keys: def.key_column_names(),
                    columns: def.columns.iter().map(|c| c.name.clone()).collect(),
                })
            };
            super::correlated::rewrite(s, &tables);
        }
        let plan = self.ctx.state().statement_to_plan(statement).await?;
        let plan = super::arithmetic::integer_literals(plan)?;
        let plan = super::arrays::typed_any_parameters(plan)?;
        let plan = super::parameters::typed_by_context(plan)?;
        let plan = super::parameters::one_type_each(super::sums::exact_bigint_sums(plan)?)?;
        // Statements over no enum type need no look at their order.
        let types = &self.engine.catalog.types;
        if types.is_empty() {
            return Ok(plan);
        }
        let udf = |name| datafusion::execution::FunctionRegistry::udf(&self.ctx, name);
        let (position, text) = (
            udf(super::enums::ENUM_POSITION)?,
            udf(super::enums::ENUM_TEXT)?,
        );
        super::enums::check_labels_compared(&plan, types)?;
        Ok(super::enums::in_label_order(plan, &position, &text)?)
    }

    /// [`Session::to_plan`] of a query whose result columns `names` names:
    /// a select list DataFusion refuses for two columns of one name, which
    /// PostgreSQL allows, and which the rewrite's hidden aliases did not
    /// foresee (`SELECT 1 AS a, 2 AS a`, or names DataFusion gives after
    /// the rewrites), is planned again with a name of its own for each
    /// column, the result shown under `names`.
    async fn plan_named(
        &self,
        statement: DfStatement,
        names: Option<&ColumnNames>,
    ) -> Result<LogicalPlan> {
        if names.is_none() {
            return self.to_plan(statement).await;
        }
        let mut renamed = statement.clone();
        match self.to_plan(statement).await {
            Err(SqlError::DataFusion(e)) if names::is_duplicate_name(&e) => {
                if let DfStatement::Statement(s) = &mut renamed {
                    names::name_each_column(s);
                }
                self.to_plan(renamed).await.map_err(|_| e.into())
            }
            planned => planned,
        }
    }

    /// Makes the whole-row references of a statement (`row_to_json(t)`)
    /// rows of their relations' columns, planning each FROM list that has
    /// them on its own to learn the columns (see [`records`]).
    async fn expand_whole_rows(&self, statement: &mut Statement) {
        let found = records::mark_whole_rows(statement);
        if found.is_empty() {
            return;
        }
        let mut columns = Vec::with_capacity(found.from_lists.len());
        for from_list in &found.from_lists {
            let listing =
                DfStatement::Statement(Box::new(Statement::Query(Box::new(from_list.clone()))));
            let plan = self.ctx.state().statement_to_plan(listing).await;
            columns.push(plan.ok().map(|plan| records::from_list_columns(&plan)));
        }
        records::resolve_whole_rows(statement, &found, &columns);
    }

    /// Runs a query and returns its rows as text, one string per row (for
    /// comparisons: values tab-separated, NULL as `\N`).
    pub(super) async fn query_text_rows(&self, sql: &str) -> Result<Vec<String>> {
        use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};
        let plan = self.plan_query(sql).await?;
        let frame = self.ctx.execute_logical_plan(plan).await?;
        let (_, stream) = self.engine.execute(frame).await?;
        let batches: Vec<_> = self
            .within_deadline(async { Ok(futures::TryStreamExt::try_collect(stream).await?) })
            .await?;
        let options = FormatOptions::default().with_null("\\N");
        let mut rows = Vec::new();
        for batch in &batches {
            let formatters = batch
                .columns()
                .iter()
                .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
                .collect::<std::result::Result<Vec<_>, _>>()?;
            for i in 0..batch.num_rows() {
                let values: Vec<String> =
                    formatters.iter().map(|f| f.value(i).to_string()).collect();
                rows.push(values.join("\t"));
            }
        }
        Ok(rows)
    }

    pub(super) fn context(&self) -> &SessionContext {
        &self.ctx
    }

    pub fn in_transaction(&self) -> bool {
        self.txn.is_some()
    }

    /// The role made with SQL the session runs as (`None`: a superuser).
    pub(super) fn role(&self) -> Option<&str> {
        self.role.as_deref()
    }

    /// How long the session may sit idle in its open transaction block
    /// (`idle_in_transaction_session_timeout`); `None` outside a block or
    /// when the limit is off.
    pub fn idle_in_transaction_timeout(&self) -> Option<std::time::Duration> {
        self.txn.as_ref()?;
        self.duration_setting("idle_in_transaction_session_timeout")
    }

    /// A statement starts: its text for the query log, its clock for
    /// `statement_timeout`.
    fn start_statement(&mut self, text: Arc<str>) {
        self.statement_text = text;
        self.statement_started = tokio::time::Instant::now();
    }

    /// Over a store that other gateways share, definitions older than this
    /// are read again before a statement.
    const CATALOG_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(1);

    async fn refresh_catalog(&self) {
        if let Err(e) = self.engine.catalog.refresh(Self::CATALOG_MAX_AGE).await {
            tracing::warn!("cannot read the table definitions again: {e}");
        }
    }

    /// When the running statement passes `statement_timeout`.
    pub(super) fn deadline(&self) -> Option<tokio::time::Instant> {
        self.duration_setting("statement_timeout")
            .map(|timeout| self.statement_started + timeout)
    }

    /// Fails with 57014 once the running statement is past
    /// `statement_timeout`: called before a commit and between the steps of
    /// long work, so that a statement that times out writes nothing.
    pub(super) fn check_deadline(&self) -> Result<()> {
        match self.deadline() {
            Some(deadline) if tokio::time::Instant::now() >= deadline => {
                Err(SqlError::statement_timeout())
            }
            _ => Ok(()),
        }
    }

    /// Runs work that only reads, stopped with 57014 at `statement_timeout`.
    pub(super) async fn within_deadline<T>(
        &self,
        work: impl std::future::Future<Output = Result<T>>,
    ) -> Result<T> {
        match self.deadline() {
            Some(deadline) => tokio::time::timeout_at(deadline, work)
                .await
                .map_err(|_| SqlError::statement_timeout())?,
            None => work.await,
        }
    }

    /// A duration parameter's value; `None` when it is 0 (off).
    fn duration_setting(&self, name: &str) -> Option<std::time::Duration> {
        self.settings
            .get(name)
            .and_then(|v| super::settings::duration_ms(&v))
            .filter(|&ms| ms > 0)
            .map(std::time::Duration::from_millis)
    }

    /// Drops the open transaction block and what it wrote (its connection
    /// is being closed).
    pub async fn abandon_transaction(&mut self) {
        if self.txn.is_some() {
            let _ = self.rollback().await;
        }
    }

    /// Parses a query string into statements, in PostgreSQL's dialect.
    pub fn parse(sql: &str) -> Result<Vec<DfStatement>> {
        let sql = dml::readable_merge(sql);
        let sql = rewrite::operators_unqualified(&sql);
        let statements =
            datafusion::sql::sqlparser::parser::Parser::parse_sql(&PostgreSqlDialect {}, &sql)
                .map_err(|e| SqlError::Syntax(e.to_string()))?;
        Ok(statements
            .into_iter()
            .map(|s| DfStatement::Statement(Box::new(s)))
            .collect())
    }

    /// Rewrites a parsed statement into what DataFusion plans
    /// ([`rewrite::rewrite`]), casts to enum types included.
    fn rewrite(&self, statement: &mut Statement) {
        rewrite::rewrite(statement, &self.settings.zone());
        super::enums::rewrite_casts(statement, &self.engine.catalog.types);
    }

    /// Runs every statement of a simple query; stops at the first error, which
    /// is the last element.
    pub async fn execute(&mut self, sql: &str) -> Vec<Result<Output>> {
        self.note_errors_sent();
        self.start_statement(Arc::from(sql));
        self.refresh_catalog().await;
        // A SELECT of a shape read by key before. No statement the checks
        // below look for starts with SELECT, so this may come first.
        if let Some(result) = self.run_by_shape(sql).await {
            return vec![result.map_err(|e| self.fail(e))];
        }
        // Boxed: the general path's state is many kilobytes, which a read
        // by key would otherwise allocate and copy on every query.
        Box::pin(self.execute_text(sql)).await
    }

    /// [`Session::execute`] for a text not read by key.
    async fn execute_text(&mut self, sql: &str) -> Vec<Result<Output>> {
        if let Some((statement, data)) = inline_copy(sql) {
            return vec![self.copy_inline(statement, data).await];
        }
        // The statements read by their words below take a text for one
        // statement: a text of several with one of them among them runs
        // statement by statement.
        if let Some(texts) = statement_texts(sql).filter(|t| t.iter().any(|t| read_by_words(t))) {
            return self
                .run_in_turn(texts.into_iter().map(Statements::Text).collect())
                .await;
        }
        // Statements the parser does not read, told by their first words
        // before anything reads the whole text.
        if let Some(result) = super::access::grant_partitions(self, sql).await {
            return vec![result.map_err(|e| self.fail(e))];
        }
        if ddl::text_command(sql).is_some() {
            if let Some(result) = diagnostics::advise::advise(self, sql).await {
                return vec![result];
            }
            if let Some(result) = ddl::set_constraints(self, sql).await {
                return vec![result.map_err(|e| self.fail(e))];
            }
            if let Err(e) = self.require_superuser("run this command") {
                return vec![Err(self.fail(e))];
            }
            if let Some(result) = ddl::sequence_command(self, sql).await {
                return vec![result];
            }
            if let Some(result) = super::enums::change_owner(self, sql) {
                return vec![result.map_err(|e| self.fail(e))];
            }
            if let Some(result) = ddl::verify_index(self, sql).await {
                return vec![result];
            }
            if let Some(result) = super::matview::text_command(self, sql).await {
                return vec![result.map_err(|e| self.fail(e))];
            }
        }
        if let Some(fetch) = cursor::Fetch::read(sql) {
            let result = match fetch {
                Ok(fetch) => self.fetch(&fetch).await,
                Err(e) => Err(e),
            };
            return vec![result.map_err(|e| self.fail(e))];
        }
        let statements = match Self::parse(sql) {
            Ok(s) => s,
            Err(e) => return vec![Err(self.fail(e))],
        };
        match <[DfStatement; 1]>::try_from(statements) {
            Ok([statement]) => vec![self.run(statement, None).await.map_err(|e| self.fail(e))],
            Err(statements) => {
                self.run_in_turn(statements.into_iter().map(Statements::Parsed).collect())
                    .await
            }
        }
    }

    /// The statements of a text of several, in turn, as PostgreSQL runs
    /// them: in one transaction, committed when the text ends and dropped
    /// at its first error (after which nothing more runs), unless the text
    /// opens or closes a block (BEGIN, COMMIT, ROLLBACK) itself. Each
    /// statement's rows are read before the next statement runs.
    ///
    /// Unlike PostgreSQL, a statement that builds from a table's rows
    /// ([`builds_from_rows`]) runs on its own, as outside a block: what
    /// the text ran before it commits first. Over a store whose writes to
    /// several partitions become whole only later (the Azure service),
    /// each statement commits on its own: such a block could write only
    /// one partition.
    async fn run_in_turn(&mut self, statements: Vec<Statements>) -> Vec<Result<Output>> {
        let mut outputs = Vec::with_capacity(statements.len());
        for statement in statements {
            let text = match &statement {
                Statements::Text(text) => text.clone(),
                Statements::Parsed(statement) => statement.to_string(),
            };
            if builds_from_rows(&text) {
                if self.txn.as_ref().is_some_and(|txn| txn.ends_with_text) {
                    if let Err(e) = self.commit().await {
                        outputs.push(Err(e));
                        return outputs;
                    }
                }
            } else if self.txn.is_none() && self.engine.store().atomic_across_partitions() {
                let mut txn = Transaction::new(self.engine.store().read_view());
                txn.ends_with_text = true;
                self.txn = Some(txn);
                self.refresh_view();
            }
            // Each statement of a text has its own statement_timeout.
            self.start_statement(Arc::from(text.as_str()));
            let results = match statement {
                Statements::Text(text) => Box::pin(self.execute_text(&text)).await,
                Statements::Parsed(statement) => {
                    vec![self.run(statement, None).await.map_err(|e| self.fail(e))]
                }
            };
            for result in results {
                outputs.push(self.produced(result).await);
            }
            if outputs.last().is_some_and(Result::is_err) {
                break;
            }
        }
        if self.txn.as_ref().is_some_and(|txn| txn.ends_with_text) {
            let failed = outputs.last().is_some_and(Result::is_err);
            let ended = match failed {
                true => self.rollback().await,
                false => self.commit().await,
            };
            if let Err(e) = ended {
                outputs.push(Err(e));
            }
        }
        outputs
    }

    /// A statement's result with its rows read ([`Output::produced`]).
    async fn produced(&mut self, result: Result<Output>) -> Result<Output> {
        match result {
            Ok(output) => output.produced().await.map_err(|e| self.fail(e)),
            failed => failed,
        }
    }

    /// Marks the open transaction failed, as PostgreSQL does after an error.
    fn fail(&mut self, e: SqlError) -> SqlError {
        if let Some(txn) = &mut self.txn {
            txn.failed = true;
        }
        e
    }

    /// Parses and plans one statement for repeated execution; a read by key
    /// prepared before is taken as it was.
    ///
    /// `declared` holds the types the client gave the parameters (`None`
    /// for those it left to the statement); where reading a parameter's
    /// values as the type the statement gives it would change them, it is
    /// planned as the client's type (see [`super::parameters::prevailing`]).
    pub async fn prepare(
        &mut self,
        sql: &str,
        declared: &[Option<DataType>],
    ) -> Result<Arc<Prepared>> {
        if let Some(Some(prepared)) = self.remembered(sql) {
            if super::parameters::prevailing(declared, Some(&prepared.param_types)).is_empty() {
                return Ok(prepared);
            }
        }
        let prepared = Arc::new(self.plan_statement(sql, declared).await?);
        if self.key_reads.len() >= MAX_KEY_READS {
            self.key_reads.clear();
        }
        let key_read = prepared.by_key.is_some().then(|| prepared.clone());
        self.key_reads.insert(prepared.sql.clone(), key_read);
        Ok(prepared)
    }

    /// What `key_reads` knows of `sql`: `Some(Some(_))`, the read by key
    /// prepared from it, its table's definition still the one it was made
    /// for; `Some(None)`, not a read by key; `None`, nothing (or a stale plan).
    fn remembered(&self, sql: &str) -> Option<Option<Arc<Prepared>>> {
        let Some(prepared) = self.key_reads.get(sql)? else {
            return Some(None);
        };
        let by_key = prepared.by_key.as_ref()?;
        let def = self.table_def(by_key.table_name());
        by_key
            .is_current(def.as_ref())
            .then(|| Some(prepared.clone()))
    }

    /// Parses and plans one statement.
    async fn plan_statement(
        &mut self,
        sql: &str,
        declared: &[Option<DataType>],
    ) -> Result<Prepared> {
        // A FETCH answers with its cursor's columns, known from now on.
        let text_command = match cursor::Fetch::read(sql) {
            Some(fetch) => {
                let fetch = fetch?;
                Some(
                    (!fetch.skip)
                        .then(|| self.cursor_schema(&fetch.cursor))
                        .flatten(),
                )
            }
            None => ddl::text_command(sql),
        };
        if let Some(result) = text_command {
            return Ok(Prepared {
                sql: Arc::from(sql),
                statement: None,
                plan: None,
                param_types: vec![],
                result,
                by_key: None,
                names: None,
                text_command: true,
                kept: Default::default(),
            });
        }
        let mut statements = Self::parse(sql)?;
        if statements.len() > 1 {
            return Err(SqlError::Syntax(
                "cannot insert multiple commands into a prepared statement".into(),
            ));
        }
        let mut prepared = Prepared {
            sql: Arc::from(sql),
            statement: None,
            plan: None,
            param_types: vec![],
            result: None,
            by_key: None,
            names: None,
            text_command: false,
            kept: Default::default(),
        };
        let Some(mut statement) = statements.pop() else {
            return Ok(prepared);
        };
        let mut names = None;
        if let DfStatement::Statement(s) = &mut statement {
            names = ColumnNames::of(s);
            self.rewrite(s);
        }
        self.refresh_view();
        let writing = match &statement {
            DfStatement::Statement(s) => writing_query(s),
            _ => None,
        };
        match (&statement, writing) {
            (DfStatement::Statement(s), _) if dml::is_dml(s) => {
                (prepared.param_types, prepared.result) = dml::describe(self, s).await?;
            }
            (_, Some(query)) => {
                (prepared.param_types, prepared.result) = self.describe_writing_ctes(query).await?;
            }
            _ if is_query(&statement) => {
                let planned = self.plan_named(statement.clone(), names.as_ref()).await;
                let inferred = match &planned {
                    Ok(plan) => Some(super::parameters::types(plan)?),
                    Err(_) => None,
                };
                let prevailing = super::parameters::prevailing(declared, inferred.as_deref());
                // The client's types where they prevail; should that fail,
                // the statement's own plan, or its error.
                let plan = match self
                    .replan_as_declared(sql, &prevailing, names.as_ref())
                    .await
                {
                    Some((plan, replanned)) => {
                        statement = replanned;
                        prepared.param_types = super::parameters::types(&plan)?;
                        plan
                    }
                    None => {
                        let plan = planned?;
                        prepared.param_types = inferred.unwrap_or_default();
                        plan
                    }
                };
                let schema = Arc::new(plan.schema().as_arrow().clone());
                prepared.names = names.and_then(|n| n.resolve(schema.fields().len()));
                prepared.result = Some(match &prepared.names {
                    Some(names) => names::rename(&schema, names),
                    None => schema,
                });
                prepared.by_key = self.key_plan(&plan, prepared.names.as_deref());
                prepared.plan = Some(plan);
            }
            _ => {}
        }
        prepared.statement = Some(statement);
        Ok(prepared)
    }

    /// `sql`'s statement, parsed again, with the parameters of `prevailing`
    /// cast to their declared types, and its plan; `None` where there are
    /// none, or it cannot be planned.
    async fn replan_as_declared(
        &self,
        sql: &str,
        prevailing: &[(usize, DataType)],
        names: Option<&ColumnNames>,
    ) -> Option<(LogicalPlan, DfStatement)> {
        if prevailing.is_empty() {
            return None;
        }
        let mut statement = Self::parse(sql).ok()?.pop()?;
        if let DfStatement::Statement(s) = &mut statement {
            super::parameters::cast_parameters(s, prevailing);
            self.rewrite(s);
        }
        let plan = self.plan_named(statement.clone(), names).await.ok()?;
        Some((plan, statement))
    }

    /// Starts a prepared statement with parameter values, and runs it if
    /// it is a read by key (`Prepared::skips_planning`); `None` when the
    /// general path must run it ([`Session::execute_prepared`] does both).
    pub async fn read_by_key(
        &mut self,
        prepared: &Prepared,
        params: &ParamValues,
    ) -> Result<Option<StoredRows>> {
        self.note_errors_sent();
        self.start_statement(prepared.sql.clone());
        self.refresh_catalog().await;
        match &prepared.by_key {
            Some(by_key) => self.execute_by_key(by_key, params).await,
            None => Ok(None),
        }
    }

    /// Executes a prepared statement with parameter values.
    pub async fn execute_prepared(
        &mut self,
        prepared: &Prepared,
        params: ParamValues,
    ) -> Result<Output> {
        if let Some(rows) = self.read_by_key(prepared, &params).await? {
            return Ok(Output::Stored(rows));
        }
        // Boxed: the general path's state is many kilobytes, which a read
        // by key would otherwise allocate and copy on every execution.
        Box::pin(self.execute_planned(prepared, params)).await
    }

    /// [`Session::execute_prepared`] for a statement not read by key.
    async fn execute_planned(
        &mut self,
        prepared: &Prepared,
        params: ParamValues,
    ) -> Result<Output> {
        if prepared.text_command {
            return self
                .execute(&prepared.sql)
                .await
                .pop()
                .unwrap_or_else(|| Ok(Output::Command(String::new())));
        }
        let result = match (&prepared.plan, &prepared.statement) {
            (Some(plan), _) => {
                self.check_not_failed()?;
                self.refresh_view();
                let plan = self.bind(plan.clone(), params)?;
                self.run_plan(plan)
                    .await
                    .map(|output| with_names(output, prepared.names.as_deref()))
            }
            // Rewritten when it was prepared; not a query (a query has a
            // plan), so no result columns to name.
            (None, Some(DfStatement::Statement(s))) if dml::is_dml(s) => {
                match self.before_statement().await {
                    Ok(()) => self.run_dml(s, Some(&prepared.kept), Some(params)).await,
                    Err(e) => Err(e),
                }
            }
            (None, Some(statement)) => {
                self.run_rewritten(statement.clone(), Some(params), None)
                    .await
            }
            (None, None) => Ok(Output::Command(String::new())),
        };
        result.map_err(|e| self.fail(e))
    }

    /// A read by key of a planned query, if it is one.
    fn key_plan(
        &self,
        plan: &LogicalPlan,
        names: Option<&[Option<String>]>,
    ) -> Option<Arc<KeyPlan>> {
        let key_ordered = self.engine.store().key_ordered();
        let optimized = self.ctx.state().optimize(plan).ok()?;
        let by_key = KeyPlan::detect(&optimized, &self.engine.catalog, key_ordered)?;
        Some(Arc::new(by_key.with_names(names)))
    }

    /// Runs a read by key, or returns `None` when the general path must.
    async fn execute_by_key(
        &mut self,
        by_key: &Arc<KeyPlan>,
        params: &ParamValues,
    ) -> Result<Option<StoredRows>> {
        // A role's grant limited to some partitions takes the general path,
        // whose scan applies the limit; so does a session with key pushdown
        // off.
        let def = self.table_def(by_key.table_name());
        let limited = def.as_ref().is_some_and(|def| {
            self.role()
                .is_some_and(|r| super::access::PartitionLimit::of(def, r).is_some())
        });
        if limited || !self.view.pushdown() {
            return Ok(None);
        }
        self.check_not_failed()?;
        if let (Some(def), true) = (&def, self.role.is_some()) {
            self.require(def, crate::catalog::Privilege::Select)?;
        }
        let view = self.current_view();
        let written = self
            .txn
            .as_ref()
            .and_then(|t| t.written_rows(by_key.table_name()));
        let monitor = &self.engine.monitor;
        by_key
            .execute(def, view, written, params, monitor, &self.statement_text)
            .await
            .map_err(|e| self.fail(e))
    }

    /// Reads by key a query that compares key columns with literals: the
    /// query is prepared with parameters in their place (once: see
    /// `key_reads`), and each run passes the literals as the parameters'
    /// values. `None` when the general path must run it.
    async fn run_by_key_with_literals(
        &mut self,
        query: &datafusion::sql::sqlparser::ast::Query,
    ) -> Result<Option<Output>> {
        // The text's own placeholders would be confused with the literals'.
        if self.statement_text.contains('$') {
            return Ok(None);
        }
        let mut parameterized = query.clone();
        let Some(values) = super::fastpath::parameterize(&mut parameterized) else {
            return Ok(None);
        };
        let text = parameterized.to_string();
        let prepared = match self.remembered(&text) {
            Some(Some(prepared)) => prepared,
            Some(None) => return Ok(None),
            None => match self.prepare(&text, &[]).await {
                Ok(prepared) => prepared,
                // An error is the general path's to report, on the query as sent.
                Err(_) => return Ok(None),
            },
        };
        let Some(by_key) = &prepared.by_key else {
            return Ok(None);
        };
        // The text's shape leads to this statement when it is clear which
        // of the text's literals are the ones just taken out of the query.
        if let Some((shape, literals)) = super::fastpath::literal_shape(&self.statement_text) {
            if let Some(params) = super::fastpath::only_embedding(&values, &literals) {
                let fixed: Vec<_> = (literals.into_iter().enumerate())
                    .filter(|(i, _)| !params.contains(i))
                    .collect();
                if self.key_shapes.len() >= MAX_KEY_READS {
                    self.key_shapes.clear();
                }
                let read = ShapedRead {
                    params,
                    fixed,
                    prepared: prepared.clone(),
                };
                // One prepared for a table as it was before is replaced.
                let reads = self.key_shapes.entry(shape).or_default();
                match reads.iter().position(|r| r.fixed == read.fixed) {
                    Some(i) => reads[i] = read,
                    None if reads.len() < MAX_SHAPED_READS => reads.push(read),
                    None => {}
                }
            }
        }
        let params = ParamValues::List(values.into_iter().map(Into::into).collect());
        let rows = self.execute_by_key(by_key, &params).await?;
        Ok(rows.map(Output::Stored))
    }

    /// Runs, without parsing it, a query whose text has the shape of one
    /// read by key before ([`super::fastpath::literal_shape`]): its
    /// literals are the parameters of the statement that one was prepared
    /// as. `None` when the general path must run it.
    async fn run_by_shape(&mut self, sql: &str) -> Option<Result<Output>> {
        let select = sql.trim_start().get(..6)?;
        if self.key_shapes.is_empty() || !select.eq_ignore_ascii_case("select") {
            return None;
        }
        let (shape, literals) = super::fastpath::literal_shape(sql)?;
        let read =
            self.key_shapes.get(&shape)?.iter().find(|read| {
                (read.fixed.iter()).all(|(i, value)| literals.get(*i) == Some(value))
            })?;
        let values = read.params.iter().map(|&i| literals[i].clone().into());
        let params = ParamValues::List(values.collect());
        let prepared = read.prepared.clone();
        let by_key = prepared.by_key.as_ref()?;
        // A statement prepared for an earlier definition of its table
        // answers `None` (the read checks it), and the general path runs.
        let run = async {
            // What the general path does before it runs a query.
            self.check_not_failed()?;
            self.engine.catalog.sequences.persist().await?;
            self.refresh_view();
            self.execute_by_key(by_key, &params).await
        };
        run.await.map(|rows| rows.map(Output::Stored)).transpose()
    }

    /// Fails the open transaction when the connection sent an error since
    /// the last statement (one raised while a query's rows were read).
    fn note_errors_sent(&mut self) {
        if self.notices.take_error_sent() {
            if let Some(txn) = &mut self.txn {
                txn.failed = true;
            }
        }
    }

    pub(super) fn check_not_failed(&self) -> Result<()> {
        match &self.txn {
            Some(t) if t.failed => Err(SqlError::InFailedTransaction),
            _ => Ok(()),
        }
    }

    /// What the current statement reads through.
    pub(super) fn current_view(&self) -> Arc<dyn crate::store::EntityRead> {
        match &self.txn {
            Some(txn) => txn.view(),
            None => self.engine.store().read_view(),
        }
    }

    /// Points scans at the data this statement must see: the transaction's
    /// view and definitions, or a fresh snapshot.
    pub(super) fn refresh_view(&self) {
        let (definitions, written) = match &self.txn {
            Some(txn) => (txn.definitions(), txn.writes()),
            None => Default::default(),
        };
        self.view.set(self.current_view(), definitions, written);
    }

    /// A table's definition as this session sees it (its open transaction's
    /// own changes first).
    pub(super) fn table_def(&self, name: &str) -> Option<Arc<TableDef>> {
        match self.txn.as_ref().and_then(|t| t.definition(name)) {
            Some(own) => own,
            None => self.engine.catalog.get(name),
        }
    }

    /// Every table's definition as this statement sees it.
    pub(super) fn tables(&self) -> Vec<Arc<TableDef>> {
        self.view.tables(&self.engine.catalog)
    }

    pub(super) fn table(&self, name: &str) -> Result<Arc<TableDef>> {
        self.table_def(name)
            .ok_or_else(|| CatalogError::TableNotFound(name.to_owned()).into())
    }

    /// Runs a statement that changes definitions inside the open transaction,
    /// or inside one of its own that commits when it succeeds.
    async fn run_ddl(&mut self, statement: Statement) -> Result<Output> {
        if !matches!(statement, Statement::Grant(_) | Statement::Revoke(_)) {
            self.require_superuser("change definitions")?;
        }
        let implicit = self.open_implicit();
        let mut build = None;
        let result = match statement {
            Statement::CreateTable(create) => ddl::create_table(self, create).await,
            Statement::Drop {
                object_type: datafusion::sql::sqlparser::ast::ObjectType::Index,
                names,
                if_exists,
                ..
            } => ddl::drop_indexes(self, &names, if_exists),
            Statement::Drop {
                object_type,
                names,
                if_exists,
                cascade,
                ..
            } => {
                use datafusion::sql::sqlparser::ast::ObjectType;
                let kind = match object_type {
                    ObjectType::MaterializedView => ddl::Relation::MaterializedView,
                    ObjectType::View => ddl::Relation::View,
                    _ => ddl::Relation::Table,
                };
                ddl::drop_relations(self, kind, &names, if_exists, cascade)
            }
            Statement::CreateView(create) if create.materialized => {
                super::matview::create(self, create).await
            }
            Statement::CreateView(create) => super::views::create(self, create).await,
            Statement::AlterTable(alter) => ddl::alter_table(self, alter).await,
            Statement::AlterIndex {
                name,
                operation: AlterIndexOperation::RenameIndex { index_name },
            } => super::rename::rename_index(self, &name, &index_name),
            // Outside a transaction block an index is built after its
            // definition commits, a page at a time, while writes go on.
            Statement::CreateIndex(create) => {
                ddl::create_index(self, create, implicit).map(|(output, created)| {
                    build = created;
                    output
                })
            }
            Statement::Comment {
                object_type,
                object_name,
                comment,
                if_exists,
            } => ddl::comment(self, object_type, &object_name, comment, if_exists),
            Statement::Grant(g) => super::access::grant_or_revoke(
                self,
                true,
                &g.privileges,
                g.objects.as_ref(),
                &g.grantees,
                None,
            ),
            Statement::Revoke(r) => super::access::grant_or_revoke(
                self,
                false,
                &r.privileges,
                r.objects.as_ref(),
                &r.grantees,
                None,
            ),
            other => Err(SqlError::Internal(format!(
                "not a definition change: {other}"
            ))),
        };
        if implicit {
            self.close_implicit(result.is_ok()).await?;
        }
        if let (true, Some((table, index))) = (result.is_ok(), build) {
            self.engine
                .catalog
                .build_index(&table, &index, self.deadline())
                .await?;
        }
        result
    }

    /// Opens a transaction for one statement when none is open; true when it did.
    pub(super) fn open_implicit(&mut self) -> bool {
        if self.txn.is_some() {
            return false;
        }
        let mut txn = Transaction::new(self.engine.store().read_view());
        txn.implicit = true;
        self.txn = Some(txn);
        self.refresh_view();
        true
    }

    /// Ends the statement's own transaction: commits it if the statement
    /// succeeded, else drops it.
    pub(super) async fn close_implicit(&mut self, succeeded: bool) -> Result<()> {
        let mut txn = self.txn.take().expect("the statement's own transaction");
        let sequences = std::mem::take(&mut txn.sequences);
        let committed = match succeeded {
            true => self.commit_transaction(txn).await,
            false => Ok(()),
        };
        self.end_sequences(sequences, succeeded && committed.is_ok())
            .await?;
        committed
    }

    /// At the end of a transaction: the sequences it dropped go if it
    /// committed, and those it created go if it did not, and those it gave
    /// new owners get their owners back.
    async fn end_sequences(
        &self,
        changes: crate::sql::txn::SequenceChanges,
        committed: bool,
    ) -> Result<()> {
        let sequences = &self.engine.catalog.sequences;
        if !committed {
            for (name, owner) in changes.owners.into_iter().rev() {
                if let Some(sequence) = sequences.get(&name) {
                    let mut def = sequence.def.clone();
                    def.owned_by = Some(owner);
                    sequences.alter(def).await?;
                }
            }
        }
        let gone = if committed {
            changes.dropped
        } else {
            changes.created
        };
        for name in gone {
            match sequences.drop(&name).await {
                Ok(()) | Err(CatalogError::TableNotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Adds changes made with table definition `used` to the open transaction.
    pub(super) fn apply_to_transaction(
        &mut self,
        changes: Vec<Change>,
        used: &Arc<TableDef>,
    ) -> Result<()> {
        let applied = self.transaction()?.apply(changes, used);
        applied.map_err(|(table, key)| SqlError::UniqueViolation {
            key: self.describe_key(&table, &key),
            table,
        })
    }

    /// On a store whose writes over several partitions become whole only
    /// later (the Azure service, through its outbox), a transaction block
    /// may write only what one entity group transaction holds: rows of one
    /// partition of one table that derives no index entries or view rows.
    fn check_block_write(&mut self, changes: &[Change]) -> Result<()> {
        if self.engine.store().atomic_across_partitions() || self.transaction()?.implicit {
            return Ok(());
        }
        let mut partitions = self.transaction()?.written_partitions();
        partitions.extend(
            changes
                .iter()
                .map(|c| (c.table.clone(), c.key.partition_key.clone())),
        );
        let tables: std::collections::BTreeSet<&str> =
            partitions.iter().map(|(t, _)| t.as_str()).collect();
        let derives = self.engine.catalog.derives_from(&tables);
        if partitions.len() <= 1 && !derives {
            return Ok(());
        }
        let tables: Vec<&str> = tables.into_iter().collect();
        Err(SqlError::FeatureNotSupported(format!(
            "this store applies a transaction block's writes atomically only within one partition \
             of one table without indexes or maintained materialized views; this block would write \
             {} partition(s) of {}{}. Run the statement outside BEGIN ... COMMIT: there, writes \
             over several partitions are made whole through the outbox",
            partitions.len(),
            tables.join(", "),
            if derives {
                " and their index or view rows"
            } else {
                ""
            }
        )))
    }

    /// A key as its table's key columns show it.
    fn describe_key(&self, table: &str, key: &EntityKey) -> String {
        match self.table_def(table) {
            Some(def) => def.describe_key(key),
            None => key.to_string(),
        }
    }

    /// The row the open transaction block wrote with `entry` in the unique
    /// index stored in `store_table` (see `Transaction::unique_entry`).
    pub(super) fn written_unique_entry(
        &self,
        store_table: &str,
        entry: &crate::model::EntityKey,
    ) -> Option<crate::model::EntityKey> {
        self.txn.as_ref()?.unique_entry(store_table, entry).cloned()
    }

    /// The open transaction, which DDL statements change.
    pub(super) fn transaction(&mut self) -> Result<&mut Transaction> {
        self.txn
            .as_mut()
            .ok_or_else(|| SqlError::Internal("no open transaction".into()))
    }

    async fn run(&mut self, statement: DfStatement, params: Option<ParamValues>) -> Result<Output> {
        let mut statement = statement;
        let mut names = None;
        if let DfStatement::Statement(s) = &mut statement {
            names = match s.as_mut() {
                Statement::Prepare {
                    name,
                    data_types,
                    statement,
                } => {
                    let parameter_types = data_types
                        .iter()
                        .map(super::types::parameter_type)
                        .collect();
                    let prepared = PreparedQuery {
                        names: ColumnNames::of(statement),
                        parameter_types,
                    };
                    self.prepared_queries.insert(normalize(name), prepared);
                    None
                }
                Statement::Execute {
                    name: Some(name),
                    parameters,
                    ..
                } => {
                    let prepared = executed_name(name).and_then(|n| self.prepared_queries.get(&n));
                    prepared.and_then(|prepared| {
                        prepared.read_texts(parameters, &self.settings.zone());
                        prepared.names.clone()
                    })
                }
                s => ColumnNames::of(s),
            };
            // A write prepared with SQL's PREPARE is rewritten when
            // `Session::prepare` plans it, once.
            if !matches!(s.as_ref(), Statement::Prepare { statement, .. } if dml::is_dml(statement))
            {
                self.rewrite(s);
            }
        }
        self.run_rewritten(statement, params, names).await
    }

    /// Runs a statement [`rewrite::rewrite`] has rewritten; `names` are
    /// the result columns' names it had before.
    async fn run_rewritten(
        &mut self,
        statement: DfStatement,
        params: Option<ParamValues>,
        names: Option<ColumnNames>,
    ) -> Result<Output> {
        if let DfStatement::Statement(s) = &statement {
            match s.as_ref() {
                Statement::StartTransaction { .. } => return self.begin(),
                Statement::Commit { .. } => return self.commit().await,
                Statement::Rollback {
                    savepoint: Some(name),
                    ..
                } => {
                    return self.savepoint_command(
                        &name.value,
                        Transaction::rollback_to,
                        "ROLLBACK TO SAVEPOINT",
                    )
                }
                Statement::Rollback { .. } => return self.rollback().await,
                Statement::Savepoint { name } => {
                    let name = name.value.clone();
                    return self.savepoint_command(
                        &name,
                        |txn, name| {
                            txn.savepoint(name);
                            true
                        },
                        "SAVEPOINT",
                    );
                }
                Statement::ReleaseSavepoint { name } => {
                    let name = name.value.clone();
                    return self.savepoint_command(
                        &name,
                        Transaction::release,
                        "RELEASE SAVEPOINT",
                    );
                }
                _ => {}
            }
        }
        self.before_statement().await?;
        let DfStatement::Statement(s) = statement else {
            return self.run_query(statement, params, names).await;
        };
        match *s {
            s @ (Statement::CreateTable(_)
            | Statement::AlterTable(_)
            | Statement::AlterIndex { .. }
            | Statement::Comment { .. }
            | Statement::CreateIndex(_)
            | Statement::Drop {
                object_type: datafusion::sql::sqlparser::ast::ObjectType::Index,
                ..
            }
            | Statement::Drop {
                object_type:
                    datafusion::sql::sqlparser::ast::ObjectType::Table
                    | datafusion::sql::sqlparser::ast::ObjectType::MaterializedView
                    | datafusion::sql::sqlparser::ast::ObjectType::View,
                ..
            }
            | Statement::CreateView(_)
            | Statement::Grant(_)
            | Statement::Revoke(_)) => self.run_ddl(s).await,
            // pg_dump gives the schema its owner; tablegate's schema has one.
            Statement::AlterSchema(alter)
                if table_name(&alter.name).is_ok_and(|n| n == "public")
                    && alter.operations.iter().all(|o| {
                        matches!(
                            o,
                            datafusion::sql::sqlparser::ast::AlterSchemaOperation::OwnerTo { .. }
                        )
                    }) =>
            {
                self.require_superuser("change definitions")?;
                Ok(Output::Command("ALTER SCHEMA".into()))
            }
            Statement::CreateRole(create) => super::access::create_role(self, create).await,
            Statement::AlterRole { name, operation } => {
                super::access::alter_role(self, &name, &operation).await
            }
            Statement::Drop {
                object_type:
                    datafusion::sql::sqlparser::ast::ObjectType::Role
                    | datafusion::sql::sqlparser::ast::ObjectType::User,
                names,
                if_exists,
                ..
            } => {
                let implicit = self.open_implicit();
                let result = super::access::drop_roles(self, &names, if_exists).await;
                if implicit {
                    self.close_implicit(result.is_ok()).await?;
                }
                result
            }
            Statement::Truncate(truncate) => {
                self.require_superuser("truncate tables")?;
                ddl::truncate(self, truncate).await
            }
            // One of several statements in a query string (a lone one is
            // read before parsing): read again from its text.
            Statement::CreateType {
                name,
                representation,
            } => {
                self.require_superuser("change definitions")?;
                super::enums::create(self, &name, representation.as_ref()).await
            }
            Statement::AlterType(alter) => {
                self.require_superuser("change definitions")?;
                super::enums::alter(self, &alter).await
            }
            Statement::Drop {
                object_type: datafusion::sql::sqlparser::ast::ObjectType::Type,
                names,
                if_exists,
                cascade,
                ..
            } => {
                self.require_superuser("change definitions")?;
                super::enums::drop(self, &names, if_exists, cascade).await
            }
            s @ Statement::CreateSequence { .. } => ddl::sequence_command(self, &s.to_string())
                .await
                .unwrap_or_else(|| {
                    Err(SqlError::Internal(format!("not a sequence statement: {s}")))
                }),
            Statement::Drop {
                object_type: datafusion::sql::sqlparser::ast::ObjectType::Sequence,
                names,
                if_exists,
                ..
            } => ddl::drop_sequences(self, &names, if_exists).await,
            Statement::Copy {
                source,
                to,
                target,
                options,
                legacy_options,
                ..
            } => {
                self.copy(source, to, target, &options, &legacy_options)
                    .await
            }
            Statement::Set(set) if !set.to_string().to_lowercase().contains("datafusion.") => {
                self.set(set)
            }
            Statement::ShowVariable { variable } => self.show(&variable),
            Statement::Reset(reset) => {
                match reset.reset {
                    datafusion::sql::sqlparser::ast::Reset::ALL => self.settings.reset_all(),
                    datafusion::sql::sqlparser::ast::Reset::ConfigurationParameter(name) => {
                        self.settings.reset(&name.to_string())
                    }
                }
                Ok(Output::Command("RESET".into()))
            }
            // A reader's lock (pg_dump takes one of every table it dumps):
            // reads here are of a snapshot, which no writer changes, so it
            // holds already. Stronger locks, which would keep writers out,
            // are not kept: refused rather than pretended.
            Statement::Lock(lock) => {
                use datafusion::sql::sqlparser::ast::LockTableMode;
                for target in &lock.tables {
                    let name = table_name(&target.name)?;
                    if self.table_def(&name).is_none() {
                        return Err(CatalogError::TableNotFound(name).into());
                    }
                }
                match lock.lock_mode {
                    Some(LockTableMode::AccessShare) => Ok(Output::Command("LOCK TABLE".into())),
                    _ => Err(SqlError::FeatureNotSupported(format!(
                        "{lock}: tables are not locked here; concurrent writers conflict with SQLSTATE 40001 instead"
                    ))),
                }
            }
            Statement::Discard { object_type } => {
                use datafusion::sql::sqlparser::ast::DiscardObject;
                // Settings go back to their start; prepared statements and
                // portals belong to the protocol layer, which keeps them.
                if object_type == DiscardObject::ALL {
                    self.settings.reset_all();
                    self.cursors.clear();
                }
                if matches!(object_type, DiscardObject::ALL | DiscardObject::TEMP) {
                    let (mark, names) = &mut self.temporary;
                    names.clear();
                    let mark = mark.clone();
                    self.engine.drop_temporary_tables(Some(&mark)).await?;
                }
                Ok(Output::Command(format!("DISCARD {object_type}")))
            }
            Statement::Deallocate { name, .. } if name.value.eq_ignore_ascii_case("all") => {
                self.prepared_writes.clear();
                self.prepared_queries.clear();
                Ok(Output::Command("DEALLOCATE ALL".into()))
            }
            Statement::Deallocate { name, .. }
                if self.prepared_writes.remove(&normalize(&name)).is_some() =>
            {
                Ok(Output::Command("DEALLOCATE".into()))
            }
            Statement::Prepare {
                name, statement, ..
            } if dml::is_dml(&statement) => {
                let prepared = self.prepare(&statement.to_string(), &[]).await?;
                self.prepared_writes.insert(normalize(&name), prepared);
                Ok(Output::Command("PREPARE".into()))
            }
            Statement::Execute {
                name: Some(name),
                parameters,
                ..
            } if executed_name(&name)
                .is_some_and(|name| self.prepared_writes.contains_key(&name)) =>
            {
                let name = executed_name(&name).unwrap_or_default();
                let prepared = self.prepared_writes[&name].clone();
                let values = self.parameter_values(&parameters).await?;
                let values = values.into_iter().map(Into::into).collect();
                Box::pin(self.execute_planned(&prepared, ParamValues::List(values))).await
            }
            Statement::Declare { mut stmts } if stmts.len() == 1 => {
                self.declare(stmts.remove(0)).await
            }
            Statement::Close { cursor } => {
                match cursor {
                    datafusion::sql::sqlparser::ast::CloseCursor::All => self.cursors.clear(),
                    datafusion::sql::sqlparser::ast::CloseCursor::Specific { name } => {
                        let name = normalize(&name);
                        if self.cursors.remove(&name).is_none() {
                            return Err(SqlError::value(
                                "34000",
                                format!("cursor \"{name}\" does not exist"),
                            ));
                        }
                    }
                }
                Ok(Output::Command("CLOSE CURSOR".into()))
            }
            Statement::Query(query) if super::writing_ctes::has_writing_ctes(&query) => {
                self.run_writing_ctes(*query, params, names).await
            }
            s if dml::is_dml(&s) => self.run_dml(&s, None, params).await,
            Statement::Query(query) if params.is_none() => {
                match self.run_by_key_with_literals(&query).await? {
                    Some(output) => Ok(output),
                    None => {
                        let statement = DfStatement::Statement(Box::new(Statement::Query(query)));
                        self.run_query(statement, params, names).await
                    }
                }
            }
            s => {
                self.run_query(DfStatement::Statement(Box::new(s)), params, names)
                    .await
            }
        }
    }

    /// The values of `EXECUTE name(...)`'s parameters, computed as a
    /// SELECT of them would be.
    async fn parameter_values(
        &mut self,
        parameters: &[datafusion::sql::sqlparser::ast::Expr],
    ) -> Result<Vec<datafusion::common::ScalarValue>> {
        if parameters.is_empty() {
            return Ok(Vec::new());
        }
        let list: Vec<String> = parameters.iter().map(ToString::to_string).collect();
        let mut statements = Self::parse(&format!("SELECT {}", list.join(", ")))?;
        let Some(mut statement) = statements.pop() else {
            return Ok(Vec::new());
        };
        if let DfStatement::Statement(s) = &mut statement {
            self.rewrite(s);
        }
        let plan = self.to_plan(statement).await?;
        let batches = self.ctx.execute_logical_plan(plan).await?.collect().await?;
        let Some(row) = batches.iter().find(|b| b.num_rows() > 0) else {
            return Ok(Vec::new());
        };
        row.columns()
            .iter()
            .map(|column| Ok(datafusion::common::ScalarValue::try_from_array(column, 0)?))
            .collect()
    }

    pub(super) async fn run_query(
        &mut self,
        statement: DfStatement,
        params: Option<ParamValues>,
        names: Option<ColumnNames>,
    ) -> Result<Output> {
        let mut plan = self.plan_named(statement, names.as_ref()).await?;
        if let Some(params) = params {
            plan = self.bind(plan, params)?;
        }
        // Lined up with the rows' columns (an EXECUTE's plan has none).
        let output = self.run_plan(plan).await?;
        let names = match (&output, names) {
            (Output::Rows { schema, .. }, Some(names)) => names.resolve(schema.fields().len()),
            _ => None,
        };
        Ok(with_names(output, names.as_deref()))
    }

    async fn run_plan(&self, plan: LogicalPlan) -> Result<Output> {
        let options = datafusion::execution::context::SQLOptions::new()
            .with_allow_ddl(false)
            .with_allow_dml(false);
        options
            .verify_plan(&plan)
            .map_err(|e| SqlError::FeatureNotSupported(e.to_string()))?;
        self.require_reads(&plan, None)?;
        // PREPARE and DEALLOCATE take effect when planned, and answer with
        // their command tag, as in PostgreSQL, not with an empty result.
        use datafusion::logical_expr::Statement as PlanStatement;
        let command = match &plan {
            LogicalPlan::Statement(PlanStatement::Prepare(_)) => Some("PREPARE"),
            LogicalPlan::Statement(PlanStatement::Deallocate(_)) => Some("DEALLOCATE"),
            _ => None,
        };
        let frame = self.ctx.execute_logical_plan(plan).await?;
        if let Some(tag) = command {
            return Ok(Output::Command(tag.into()));
        }
        let schema = Arc::new(frame.schema().as_arrow().clone());
        Ok(Output::Rows {
            schema,
            stream: self.execute_watched(frame).await?,
            tag: "SELECT".into(),
        })
    }

    /// Executes a planned statement; when its rows have been read, the
    /// statement goes into the query log, and its low-density scans warn.
    /// Past `statement_timeout` the rows end with SQLSTATE 57014 (for
    /// UPDATE and DELETE, before anything is written).
    pub(super) async fn execute_watched(
        &self,
        frame: datafusion::prelude::DataFrame,
    ) -> Result<SendableRecordBatchStream> {
        let (plan, stream) = self.engine.execute(frame).await?;
        Ok(Box::pin(diagnostics::Watched::new(
            stream,
            plan,
            self.engine.monitor.clone(),
            self.notices.clone(),
            self.statement_text.clone(),
            self.deadline(),
        )))
    }

    /// Logs a statement that read no table and was not planned, begun at
    /// `started`, which produced `rows` rows.
    pub(super) fn log_unplanned(
        &self,
        started: (std::time::SystemTime, std::time::Instant),
        rows: u64,
    ) {
        self.engine
            .monitor
            .record_statement(diagnostics::queries::QueryRecord {
                id: 0,
                started: started.0,
                text: self.statement_text.clone(),
                elapsed: started.1.elapsed(),
                rows,
                scans: Vec::new(),
            });
    }

    /// What every statement past the transaction commands starts with.
    async fn before_statement(&mut self) -> Result<()> {
        self.check_not_failed()?;
        // Values an earlier statement drew from sequences are logged before
        // this one runs (data that holds them is logged before its commit).
        self.engine.catalog.sequences.persist().await?;
        self.refresh_view();
        Ok(())
    }

    /// Runs DML: in a transaction, buffers its changes; otherwise commits them,
    /// re-running the statement on a fresh snapshot when a concurrent writer
    /// changed a row it read (as PostgreSQL's READ COMMITTED re-checks rows).
    /// A prepared statement passes where its rewrite is kept.
    pub(super) async fn run_dml(
        &mut self,
        statement: &Statement,
        kept: Option<&dml::KeptRewrite>,
        params: Option<ParamValues>,
    ) -> Result<Output> {
        let mut attempt = 0;
        loop {
            self.refresh_view();
            let (changes, output, used) =
                dml::plan_changes(self, statement, kept, params.clone()).await?;
            let changes = foreign_keys::enforce(self, &used, changes).await?;
            // Foreign keys' actions change other tables' rows too.
            let mut used = vec![used];
            for change in &changes {
                if !used.iter().any(|d| d.name == change.table) {
                    used.push(self.table(&change.table)?);
                }
            }
            if self.txn.is_some() {
                self.check_block_write(&changes)?;
                let mut changes = changes;
                for def in &used {
                    let own;
                    (own, changes) = changes.into_iter().partition(|c| c.table == def.name);
                    self.apply_to_transaction(own, def)?;
                }
                return Ok(output);
            }
            let error = match self
                .commit_with_definitions(Vec::new(), changes, used)
                .await
            {
                Ok(()) => return Ok(output),
                Err(e) => e,
            };
            // A lost race re-reads (and a changed definition re-plans); so
            // does an upsert that lost a race to insert the same key.
            let retry = match &error {
                SqlError::SerializationFailure(_)
                | SqlError::Catalog(CatalogError::ChangedConcurrently(_)) => true,
                SqlError::UniqueViolation { .. } => dml::is_upsert(statement),
                _ => false,
            };
            if !retry || attempt >= MAX_RETRIES {
                return Err(error);
            }
            attempt += 1;
            // Writers racing for one row take turns instead of colliding again.
            let cap = 50u64 << attempt.min(8);
            tokio::time::sleep(std::time::Duration::from_micros(rand_below(cap))).await;
        }
    }

    async fn commit_transaction(&self, txn: Transaction) -> Result<()> {
        let (definitions, changes, used) = txn.into_parts();
        self.commit_with_definitions(definitions, changes, used)
            .await
    }

    async fn commit_with_definitions(
        &self,
        definitions: Vec<DefinitionChange>,
        changes: Vec<Change>,
        used: Vec<Arc<TableDef>>,
    ) -> Result<()> {
        self.check_deadline()?;
        let ops: Vec<_> = changes.into_iter().filter_map(Change::into_op).collect();
        // A row may hold a value drawn from a sequence: the sequence must
        // not hand it out again after a crash.
        self.engine.catalog.sequences.persist().await?;
        let dropped: Vec<String> = definitions
            .iter()
            .filter(|c| c.before.is_some() && c.after.is_none())
            .map(|c| c.name.clone())
            .collect();
        let writes = diagnostics::monitor::Writes::of(&ops, &used);
        match self.engine.catalog.commit(definitions, ops, used).await {
            Ok(()) => {
                for warning in self.engine.monitor.record_writes(writes) {
                    self.notices.warn(&warning.topic, warning.message);
                }
                // The sequences of a dropped table's serial columns go with it.
                let sequences = &self.engine.catalog.sequences;
                for table in dropped {
                    for sequence in sequences.owned_by(&table) {
                        sequences.drop(&sequence).await?;
                    }
                }
                Ok(())
            }
            Err(e) => Err(self.commit_error(e)),
        }
    }

    /// COPY's rows, outside a transaction block: one atomic insert.
    async fn insert_rows(
        &self,
        rows: LoadRows,
        near_limits: diagnostics::monitor::NearLimits,
        used: Arc<TableDef>,
    ) -> Result<u64> {
        use diagnostics::monitor::Writes;
        self.check_deadline()?;
        // A row may hold a value drawn from a sequence: the sequence must
        // not hand it out again after a crash.
        self.engine.catalog.sequences.persist().await?;
        // Spilled rows are read again after the commit, part by part, so
        // that what is noted of them stays as small as a part.
        let (writes, spilled) = match &rows {
            LoadRows::Held(rows) => (Writes::of_rows(&used.name, rows, near_limits), None),
            LoadRows::Spilled(runs) => (
                Writes::of_near_limits(&used.name, near_limits),
                Some(runs.clone()),
            ),
        };
        let count = match self.engine.catalog.insert_rows(&used, rows).await {
            Ok(count) => count,
            Err(e) => return Err(self.commit_error(e)),
        };
        let mut warnings = self.engine.monitor.record_writes(writes);
        if let Some(runs) = spilled {
            for part in runs.parts(ROWS_PER_SPILLED_PART) {
                let part = Writes::of_rows(&used.name, &part?, Default::default());
                warnings.extend(self.engine.monitor.record_writes(part));
            }
        }
        warnings.dedup_by(|a, b| a.topic == b.topic);
        for warning in warnings {
            self.notices.warn(&warning.topic, warning.message);
        }
        Ok(count)
    }

    /// A failed commit as SQL reports it.
    fn commit_error(&self, e: CatalogError) -> SqlError {
        let CatalogError::Store(e) = e else {
            return e.into();
        };
        match e.root() {
            StoreError::EntityAlreadyExists { table, key } => SqlError::UniqueViolation {
                table: table.clone(),
                key: self.describe_key(table, key),
            },
            StoreError::ConditionNotMet { table, key }
            | StoreError::EntityNotFound { table, key } => SqlError::SerializationFailure(format!(
                "a row of {table:?} ({})",
                key.partition_key
            )),
            _ => SqlError::Store(e),
        }
    }

    async fn copy(
        &mut self,
        source: CopySource,
        to: bool,
        target: CopyTarget,
        options: &[CopyOption],
        legacy: &[CopyLegacyOption],
    ) -> Result<Output> {
        let format = CopyFormat::parse(options, legacy)?;
        if to {
            if target != CopyTarget::Stdout {
                return Err(SqlError::FeatureNotSupported(
                    "COPY TO supports STDOUT only (use psql's \\copy for files)".into(),
                ));
            }
            let query = match source {
                CopySource::Query(q) => q.to_string(),
                CopySource::Table {
                    table_name: name,
                    columns,
                } => {
                    let list = if columns.is_empty() {
                        "*".to_owned()
                    } else {
                        columns
                            .iter()
                            .map(|c| c.to_string())
                            .collect::<Vec<_>>()
                            .join(", ")
                    };
                    format!("SELECT {list} FROM {name}")
                }
            };
            let statement = Self::parse(&query)?
                .pop()
                .ok_or_else(|| SqlError::Syntax("empty COPY query".into()))?;
            return match self.run_query(statement, None, None).await? {
                Output::Rows { schema, stream, .. } => Ok(Output::CopyOut {
                    schema,
                    stream,
                    format,
                }),
                _ => Err(SqlError::Syntax(
                    "COPY needs a query that returns rows".into(),
                )),
            };
        }
        if target != CopyTarget::Stdin {
            return Err(SqlError::FeatureNotSupported(
                "COPY FROM supports STDIN only (use psql's \\copy for files)".into(),
            ));
        }
        let CopySource::Table {
            table_name: name,
            columns,
        } = source
        else {
            return Err(SqlError::Syntax("COPY FROM needs a table".into()));
        };
        let def = self.table(&table_name(&name)?)?;
        dml::writable(&def, "copy to")?;
        self.require(&def, crate::catalog::Privilege::Insert)?;
        let columns: Vec<usize> = if columns.is_empty() {
            (0..def.columns.len())
                .filter(|&i| def.columns[i].system.is_none())
                .collect()
        } else {
            columns
                .iter()
                .map(|c| {
                    def.column_index(&normalize(c))
                        .ok_or_else(|| SqlError::undefined_column_of(&c.value, &def.name))
                })
                .collect::<Result<_>>()?
        };
        if let Some(copies) = &self.engine.copies {
            self.loading = Some(copies.loading(&def.name));
        }
        // Rows a statement of a block writes are held with the block's;
        // those of tables whose views read rows at commit are written from
        // memory.
        let spill_dir = match self.txn.is_none() && !self.engine.catalog.derives_by_reading(&def) {
            true => self.engine.store().spill_dir(),
            false => None,
        };
        let memory = &self.engine.runtime.memory_pool;
        let checks = super::checks::Checks::of(self, &def)?;
        let copy = CopyIn::new(
            def,
            columns,
            format,
            self.settings.zone(),
            checks,
            memory,
            spill_dir,
        );
        let columns = copy.columns();
        self.copy_in = Some(Ok(copy));
        Ok(Output::CopyIn { columns })
    }

    async fn copy_inline(&mut self, statement: &str, data: &str) -> Result<Output> {
        let parsed = Self::parse(statement)?
            .pop()
            .ok_or_else(|| SqlError::Syntax("empty COPY".into()))?;
        match self.run(parsed, None).await {
            Ok(Output::CopyIn { .. }) => {
                self.copy_data(data.as_bytes());
                Ok(Output::Command(self.copy_done().await?))
            }
            Ok(_) => Err(SqlError::Syntax("expected COPY ... FROM STDIN".into())),
            Err(e) => Err(self.fail(e)),
        }
    }

    /// A chunk of COPY FROM STDIN data. A bad chunk ends the COPY; its error
    /// is reported when the client finishes sending (as PostgreSQL does).
    pub fn copy_data(&mut self, data: &[u8]) {
        let timed_out = self.check_deadline();
        if let Some(Ok(copy)) = &mut self.copy_in {
            if let Err(e) = timed_out.and_then(|()| copy.feed(data)) {
                self.copy_in = Some(Err(e));
            }
        }
    }

    /// The end of COPY FROM STDIN data: commits the rows; returns the command tag.
    pub async fn copy_done(&mut self) -> Result<String> {
        let result = match self.copy_in.take() {
            Some(Ok(copy)) => self
                .apply_copy(copy)
                .await
                .map(|count| format!("COPY {count}")),
            Some(Err(e)) => Err(e),
            None => Err(SqlError::InvalidTransactionState(
                "no COPY in progress".into(),
            )),
        };
        self.loading = None;
        result.map_err(|e| self.fail(e))
    }

    /// The client abandoned COPY FROM STDIN.
    pub fn copy_failed(&mut self, message: &str) -> SqlError {
        self.copy_in = None;
        self.loading = None;
        self.fail(SqlError::value(
            "57014",
            format!("COPY from stdin failed: {message}"),
        ))
    }

    async fn apply_copy(&mut self, copy: CopyIn) -> Result<usize> {
        let used = copy.definition().clone();
        let (rows, near_limits) = copy.finish()?;
        // Spilled rows are read back only for a role limited to some
        // partitions.
        let limited = self
            .role()
            .is_some_and(|role| super::access::PartitionLimit::of(&used, role).is_some());
        if limited {
            rows.for_each_part(ROWS_PER_SPILLED_PART, |part| {
                self.require_partitions(&used, part.iter().map(|r| r.partition_key))
            })?;
        }
        let count = rows.len();
        foreign_keys::check_loaded(self, &used, &rows).await?;
        match (&self.txn, rows) {
            // Not made: a COPY inside a block does not spill.
            (Some(_), LoadRows::Spilled(_)) => {
                return Err(SqlError::InvalidTransactionState(
                    "a COPY inside a transaction block must hold its rows in memory".into(),
                ))
            }
            (Some(_), LoadRows::Held(rows)) => {
                let changes = (0..rows.len())
                    .map(|i| Ok(Change::inserted(&used.name, rows.entity(i, None)?)))
                    .collect::<std::result::Result<Vec<_>, StoreError>>()?;
                self.check_block_write(&changes)?;
                self.apply_to_transaction(changes, &used)?
            }
            (None, rows) => {
                self.insert_rows(rows, near_limits, used.clone()).await?;
                if let Some(copies) = &self.engine.copies {
                    copies.loaded(&used);
                }
            }
        }
        Ok(count)
    }

    fn begin(&mut self) -> Result<Output> {
        match &mut self.txn {
            None => self.txn = Some(Transaction::new(self.engine.store().read_view())),
            // What the text ran before its BEGIN joins the block.
            Some(txn) => txn.ends_with_text = false,
        }
        // Like PostgreSQL, a BEGIN inside a block only warns.
        Ok(Output::TransactionStart("BEGIN".into()))
    }

    async fn commit(&mut self) -> Result<Output> {
        // Deferred foreign keys are checked in the block's view; a failure
        // ends the block, rolled back.
        let deferred = match &self.txn {
            Some(txn) if !txn.failed => {
                self.refresh_view();
                foreign_keys::check_deferred(self, || txn.changes()).await
            }
            _ => Ok(()),
        };
        let Some(mut txn) = self.txn.take() else {
            return Ok(Output::TransactionEnd("COMMIT".into()));
        };
        let sequences = std::mem::take(&mut txn.sequences);
        if txn.failed {
            self.end_cursors(false);
            self.end_sequences(sequences, false).await?;
            return Ok(Output::TransactionEnd("ROLLBACK".into()));
        }
        let committed = match deferred {
            Ok(()) => self.commit_transaction(txn).await,
            Err(e) => Err(e),
        };
        self.end_cursors(committed.is_ok());
        self.end_sequences(sequences, committed.is_ok()).await?;
        committed?;
        Ok(Output::TransactionEnd("COMMIT".into()))
    }

    /// SAVEPOINT, RELEASE SAVEPOINT and ROLLBACK TO SAVEPOINT (`command`),
    /// which need an open block (and, but for ROLLBACK TO, one without an
    /// error). Their tag is the command's first word.
    fn savepoint_command(
        &mut self,
        name: &str,
        apply: impl FnOnce(&mut Transaction, &str) -> bool,
        command: &str,
    ) -> Result<Output> {
        let tag = command.split(' ').next().unwrap_or(command);
        // The implicit transaction of a text of several statements is no block.
        let Some(txn) = self.txn.as_mut().filter(|txn| !txn.ends_with_text) else {
            return Err(SqlError::value(
                "25P01",
                format!("{command} can only be used in transaction blocks"),
            ));
        };
        if txn.failed && tag != "ROLLBACK" {
            return Err(SqlError::InFailedTransaction);
        }
        if !apply(txn, name) {
            return Err(self.fail(SqlError::value(
                "3B001",
                format!("savepoint \"{name}\" does not exist"),
            )));
        }
        Ok(Output::Command(tag.into()))
    }

    async fn rollback(&mut self) -> Result<Output> {
        let sequences = self.txn.take().map(|t| t.sequences).unwrap_or_default();
        self.end_cursors(false);
        self.end_sequences(sequences, false).await?;
        Ok(Output::TransactionEnd("ROLLBACK".into()))
    }

    /// At the end of a transaction block: cursors without HOLD close, and
    /// so do those the block declared if it did not commit.
    fn end_cursors(&mut self, committed: bool) {
        self.cursors
            .retain(|_, c| c.hold && (committed || !c.in_block));
        for cursor in self.cursors.values_mut() {
            cursor.in_block = false;
        }
    }

    /// `DECLARE name CURSOR [WITH HOLD] FOR query`.
    async fn declare(
        &mut self,
        declare: datafusion::sql::sqlparser::ast::Declare,
    ) -> Result<Output> {
        let name = declare
            .names
            .first()
            .map(normalize)
            .ok_or_else(|| SqlError::Syntax("DECLARE needs a cursor name".into()))?;
        let query = declare
            .for_query
            .ok_or_else(|| SqlError::Syntax("DECLARE CURSOR needs FOR query".into()))?;
        let hold = declare.hold == Some(true);
        if !hold && self.txn.is_none() {
            return Err(SqlError::value(
                "25P01",
                "DECLARE CURSOR can only be used in transaction blocks",
            ));
        }
        if self.cursors.contains_key(&name) {
            return Err(SqlError::value(
                "42P03",
                format!("cursor \"{name}\" already exists"),
            ));
        }
        let statement = Statement::Query(query);
        let names = ColumnNames::of(&statement);
        let mut statement = statement;
        self.rewrite(&mut statement);
        self.refresh_view();
        let output = self
            .run_query(DfStatement::Statement(Box::new(statement)), None, names)
            .await?;
        let Output::Rows { schema, stream, .. } = output else {
            return Err(SqlError::Internal(
                "a cursor's query returned no rows".into(),
            ));
        };
        let in_block = self.txn.is_some();
        self.cursors
            .insert(name, Cursor::new(schema, stream, hold, in_block));
        Ok(Output::Command("DECLARE CURSOR".into()))
    }

    /// The columns of an open cursor.
    pub fn cursor_schema(&self, name: &str) -> Option<SchemaRef> {
        self.cursors.get(name).map(|c| c.schema.clone())
    }

    /// `FETCH` (rows out) or `MOVE` (rows skipped) on a cursor.
    async fn fetch(&mut self, fetch: &cursor::Fetch) -> Result<Output> {
        let name = &fetch.cursor;
        let cursor = self
            .cursors
            .get_mut(name)
            .ok_or_else(|| SqlError::value("34000", format!("cursor \"{name}\" does not exist")))?;
        let batches = cursor.take(fetch.count).await?;
        if fetch.skip {
            let rows: usize = batches.iter().map(|b| b.num_rows()).sum();
            return Ok(Output::Command(format!("MOVE {rows}")));
        }
        Output::from_batches(cursor.schema.clone(), batches, "FETCH")
    }

    fn set(&mut self, set: datafusion::sql::sqlparser::ast::Set) -> Result<Output> {
        use datafusion::sql::sqlparser::ast::Set;
        let (name, value) = match set {
            Set::SingleAssignment {
                variable, values, ..
            } => (
                variable.to_string(),
                values
                    .iter()
                    .map(setting_text)
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
            // `SET TIME ZONE INTERVAL '+02:00' HOUR TO MINUTE`: the offset.
            Set::SetTimeZone { value, .. } => match value {
                datafusion::sql::sqlparser::ast::Expr::Interval(interval) => {
                    ("timezone".to_owned(), setting_text(&interval.value))
                }
                value => ("timezone".to_owned(), setting_text(&value)),
            },
            Set::SetTransaction { modes, .. } => {
                for mode in modes {
                    if let datafusion::sql::sqlparser::ast::TransactionMode::IsolationLevel(level) =
                        mode
                    {
                        let level = level.to_string().to_lowercase();
                        self.set_parameter("transaction_isolation", &level)?;
                    }
                }
                return Ok(Output::Command("SET".into()));
            }
            _ => return Ok(Output::Command("SET".into())),
        };
        // `SET TIME ZONE LOCAL` is the server's zone, the one a session
        // starts with.
        let local = name == "timezone" && value.eq_ignore_ascii_case("local");
        let value = if value.eq_ignore_ascii_case("default") || local {
            self.settings.reset(&name);
            self.settings.get(&name).unwrap_or_default()
        } else {
            value
        };
        self.set_parameter(&name, &value)?;
        Ok(Output::Command("SET".into()))
    }

    fn set_parameter(&mut self, name: &str, value: &str) -> Result<()> {
        self.settings
            .set(name, value)
            .map_err(|refused| match refused {
                Refused::ReadOnly(name) => {
                    SqlError::value("55P02", format!("parameter \"{name}\" cannot be changed"))
                }
                Refused::Invalid(message) => SqlError::value("22023", message),
                Refused::Unsupported(message) => SqlError::FeatureNotSupported(message),
            })
    }

    /// `SHOW name`, `SHOW ALL`.
    fn show(&self, variable: &[datafusion::sql::sqlparser::ast::Ident]) -> Result<Output> {
        let words: Vec<String> = variable.iter().map(|i| i.value.to_lowercase()).collect();
        // SHOW's multi-word spellings of some parameters.
        let name = match words.join(" ").as_str() {
            "transaction isolation level" => "transaction_isolation".to_owned(),
            "time zone" => "timezone".to_owned(),
            "session authorization" => "session_authorization".to_owned(),
            _ => variable
                .iter()
                .map(|i| i.value.clone())
                .collect::<Vec<_>>()
                .join("."),
        };
        // DataFusion's own options, as `SET datafusion.x = ...` sets them.
        let engine_option = || {
            self.ctx
                .state()
                .config_options()
                .entries()
                .into_iter()
                .find(|e| e.key.eq_ignore_ascii_case(&name))
                .map(|e| e.value.unwrap_or_default())
        };
        let rows: Vec<(String, String)> = if name.eq_ignore_ascii_case("all") {
            self.settings.all()
        } else {
            match self.settings.get(&name).or_else(engine_option) {
                Some(v) => vec![(name.clone(), v)],
                None => {
                    return Err(SqlError::value(
                        "42704",
                        format!("unrecognized configuration parameter \"{name}\""),
                    ))
                }
            }
        };
        let all = name.eq_ignore_ascii_case("all");
        let mut fields = Vec::new();
        let mut columns: Vec<datafusion::arrow::array::ArrayRef> = Vec::new();
        if all {
            fields.push(datafusion::arrow::datatypes::Field::new(
                "name",
                DataType::Utf8,
                false,
            ));
            columns.push(Arc::new(
                datafusion::arrow::array::StringArray::from_iter_values(
                    rows.iter().map(|r| r.0.as_str()),
                ),
            ));
        }
        fields.push(datafusion::arrow::datatypes::Field::new(
            if all {
                "setting".to_owned()
            } else {
                super::settings::spelling(&name)
            },
            DataType::Utf8,
            false,
        ));
        columns.push(Arc::new(
            datafusion::arrow::array::StringArray::from_iter_values(
                rows.iter().map(|r| r.1.as_str()),
            ),
        ));
        let schema = Arc::new(datafusion::arrow::datatypes::Schema::new(fields));
        let batch = datafusion::arrow::array::RecordBatch::try_new(schema.clone(), columns)?;
        Output::from_batches(schema, vec![batch], "SHOW")
    }
}

/// The statements of a text of several, as [`Session::run_in_turn`] runs them.
enum Statements {
    /// A statement's text, for one read by its words.
    Text(String),
    Parsed(DfStatement),
}

/// Whether a statement builds from a table's rows: CREATE INDEX and
/// CREATE or REFRESH MATERIALIZED VIEW (outside a block, built after their
/// definition commits, a page at a time; inside one, refused on a table
/// the block writes), and TRUNCATE (which empties a table outside any
/// transaction).
fn builds_from_rows(sql: &str) -> bool {
    let words = ddl::first_words(sql);
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    matches!(
        words.as_slice(),
        ["create", "index" | "unique", ..]
            | ["create" | "refresh", "materialized", "view"]
            | ["truncate", ..]
    )
}

/// Whether a statement's text is read by its first words rather than by
/// the SQL parser ([`Session::execute_text`]).
fn read_by_words(sql: &str) -> bool {
    ddl::text_command(sql).is_some()
        || super::access::partitions_clause(sql).is_some()
        || cursor::Fetch::read(sql).is_some()
}

/// The texts of the statements of a query string, when it holds more than
/// one (semicolons in quotes, comments and dollar quotes are no ends).
fn statement_texts(sql: &str) -> Option<Vec<String>> {
    use datafusion::sql::sqlparser::tokenizer::{Token, Tokenizer};
    // Most texts are one statement, with at most a semicolon at its end.
    if !sql.trim_end().trim_end_matches(';').contains(';') {
        return None;
    }
    let tokens = Tokenizer::new(&PostgreSqlDialect {}, sql).tokenize().ok()?;
    let mut texts = vec![String::new()];
    for token in tokens {
        match token {
            Token::SemiColon => texts.push(String::new()),
            Token::EOF => {}
            token => texts.last_mut()?.push_str(&token.to_string()),
        }
    }
    texts.retain(|t| !t.trim().is_empty());
    (texts.len() > 1).then_some(texts)
}

/// A SET value as text: quotes and identifiers unwrapped.
fn setting_text(expr: &datafusion::sql::sqlparser::ast::Expr) -> String {
    use datafusion::sql::sqlparser::ast::Expr;
    match expr {
        Expr::Value(v) => v
            .value
            .clone()
            .into_string()
            .unwrap_or_else(|| v.to_string()),
        Expr::Identifier(i) => i.value.clone(),
        other => other.to_string().trim_matches('\'').to_owned(),
    }
}

/// `COPY ... FROM STDIN;` followed by its data in the same query string (a
/// pg_dump script run as one query): the statement and the data.
fn inline_copy(sql: &str) -> Option<(&str, &str)> {
    let start = sql.trim_start();
    if !start
        .get(..4)
        .is_some_and(|w| w.eq_ignore_ascii_case("copy"))
    {
        return None;
    }
    let (statement, rest) = start
        .split_once(";\n")
        .or_else(|| start.split_once(";\r\n"))?;
    (statement.to_lowercase().contains("from stdin") && !rest.trim().is_empty())
        .then_some((statement, rest))
}

/// Rows under PostgreSQL's column names.
fn with_names(output: Output, names: Option<&[Option<String>]>) -> Output {
    match (output, names) {
        (
            Output::Rows {
                schema,
                stream,
                tag,
            },
            Some(names),
        ) => Output::Rows {
            schema: names::rename(&schema, names),
            stream,
            tag,
        },
        (output, _) => output,
    }
}

fn is_query(statement: &DfStatement) -> bool {
    match statement {
        DfStatement::Statement(s) => {
            matches!(s.as_ref(), Statement::Query(_) | Statement::Explain { .. })
        }
        DfStatement::Explain(_) => true,
        _ => false,
    }
}

/// The query, if the statement is one whose WITH writes.
fn writing_query(statement: &Statement) -> Option<&datafusion::sql::sqlparser::ast::Query> {
    match statement {
        Statement::Query(query) if super::writing_ctes::has_writing_ctes(query) => Some(query),
        _ => None,
    }
}

/// The unqualified, normalized name of a table.
pub fn table_name(name: &ObjectName) -> Result<String> {
    let ident = name
        .0
        .last()
        .and_then(|p| p.as_ident())
        .ok_or_else(|| SqlError::Syntax(format!("invalid table name {name}")))?;
    Ok(normalize(ident))
}

/// An identifier as PostgreSQL folds it: quoted ones keep their case.
pub fn normalize(ident: &datafusion::sql::sqlparser::ast::Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}
