//! The pgwire handlers: one per server, with each connection's SQL session
//! kept in the connection's extensions.

use std::fmt::Debug;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::physical_plan::SendableRecordBatchStream;
use futures::{Sink, SinkExt, StreamExt};
use pgwire::api::auth::noop::NoopStartupHandler;
use pgwire::api::auth::sasl::scram::ScramAuth;
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{ServerParameterProvider, StartupHandler};
use pgwire::api::copy::CopyHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::send_describe_response;
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{
    CopyResponse, DescribePortalResponse, DescribeStatementResponse, FieldInfo, QueryResponse,
    Response, Tag,
};
use pgwire::api::stmt::{QueryParser, StoredStatement};
use pgwire::api::store::PortalStore;
use pgwire::api::ConnectionManager;
use pgwire::api::{ClientInfo, ClientPortalStore, PgWireConnectionState, Type, DEFAULT_NAME};
use pgwire::error::{PgWireError, PgWireResult};
use pgwire::messages::copy::{CopyData, CopyDone, CopyFail};
use pgwire::messages::extendedquery::{
    Bind, BindComplete, Describe, Execute, Parse, TARGET_TYPE_BYTE_PORTAL,
};
use pgwire::messages::simplequery::Query;
use pgwire::messages::startup::ParameterStatus;
use pgwire::messages::PgWireBackendMessage;
use pgwire::messages::PgWireFrontendMessage;
use tokio::sync::Mutex;

use super::auth::{Authentication, StartupParameters};
use super::cancel::{canceled, cancellable, Canceller, Cancels, Registration};
use super::encode;
use super::error::{error_info, error_info_in, to_pgwire};
use super::idle::IdleWatch;
use super::key_portal::Kept;
use super::params;
use super::replies::Replies;
use crate::sql::session::Notices;
use crate::sql::{Engine, Output, Prepared, Session, Settings, StoredRows};

/// A connection's session, shared by its handlers' calls; the notices and
/// error word that pass between them; its cancel signal; its idle timer.
struct Connection {
    session: Arc<Mutex<Session>>,
    notices: Notices,
    cancel: Registration,
    idle: Arc<IdleWatch>,
    /// The session's parameters (the zone its instants are shown in).
    settings: Settings,
    /// Row descriptions made lately, newest last.
    described: std::sync::Mutex<Vec<Described>>,
}

/// The row description of a result schema in a format.
struct Described {
    schema: SchemaRef,
    format: Format,
    fields: Arc<Vec<FieldInfo>>,
}

/// Row descriptions a connection keeps: a prepared statement run again and
/// again is described (Describe) and answered (RowDescription) with the same
/// columns each time, from two schemas (the statement's and its rows').
const DESCRIBED_KEPT: usize = 4;

impl Connection {
    /// The row description of `schema` in `format`.
    fn fields(&self, schema: &SchemaRef, format: &Format) -> PgWireResult<Arc<Vec<FieldInfo>>> {
        let mut described = self.described.lock().unwrap_or_else(|e| e.into_inner());
        let known = described
            .iter()
            .find(|d| Arc::ptr_eq(&d.schema, schema) && same_format(&d.format, format));
        if let Some(known) = known {
            return Ok(known.fields.clone());
        }
        let fields = Arc::new(encode::fields(schema, format)?);
        if described.len() == DESCRIBED_KEPT {
            described.remove(0);
        }
        described.push(Described {
            schema: schema.clone(),
            format: format.clone(),
            fields: fields.clone(),
        });
        Ok(fields)
    }

    /// After a statement's replies: the idle-in-transaction timer starts
    /// when the session waits in an open block.
    async fn replied(&self) {
        let session = self.session.lock().await;
        self.idle.replied(&self.session, &session);
    }
}

pub struct Handlers {
    engine: Arc<Engine>,
    parser: Arc<Parser>,
    authentication: Authentication,
    /// Open connections, for cancel requests.
    connections: Arc<ConnectionManager>,
    cancels: Arc<Cancels>,
}

impl Handlers {
    pub fn new(engine: Arc<Engine>, authentication: Authentication) -> Arc<Self> {
        let cancels = Arc::new(Cancels::default());
        Arc::new(Handlers {
            parser: Arc::new(Parser {
                engine: engine.clone(),
                cancels: cancels.clone(),
            }),
            engine,
            authentication,
            connections: Arc::new(ConnectionManager::new()),
            cancels,
        })
    }
}

/// The startup of one connection: trust, or a SCRAM exchange (whose state
/// is the connection's own).
pub enum Startup {
    Trust(Handlers),
    Scram(SASLAuthStartupHandler<StartupParameters>),
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        match self {
            Startup::Trust(h) => h.on_startup(client, message).await,
            Startup::Scram(h) => h.on_startup(client, message).await,
        }
    }
}

/// A connection's state, made at its first message after startup.
fn connection_of<C: ClientInfo>(
    engine: &Arc<Engine>,
    cancels: &Arc<Cancels>,
    client: &C,
) -> Arc<Connection> {
    client.session_extensions().get_or_insert_with(|| {
        let user = client
            .metadata()
            .get(pgwire::api::METADATA_USER)
            .cloned()
            .unwrap_or_default();
        let (pid, secret) = client.pid_and_secret_key();
        let session = Session::for_user(engine.clone(), &user);
        // Those not taken were reported at startup.
        let _ = session.settings().start_with(client.metadata());
        Connection {
            notices: session.notices(),
            settings: session.settings(),
            session: Arc::new(Mutex::new(session)),
            cancel: cancels.register(pid, &secret),
            idle: Arc::default(),
            described: Default::default(),
        }
    })
}

/// The idle timer of a connection that has started its session.
pub fn idle_watch<C: ClientInfo>(client: &C) -> Option<Arc<IdleWatch>> {
    Some(
        client
            .session_extensions()
            .get::<Connection>()?
            .idle
            .clone(),
    )
}

impl Handlers {
    pub fn engine(&self) -> &Arc<Engine> {
        &self.engine
    }

    /// Logins exchange SCRAM messages.
    pub fn scram(&self) -> bool {
        matches!(self.authentication, Authentication::Scram(_))
    }

    fn connection<C: ClientInfo>(&self, client: &C) -> Arc<Connection> {
        connection_of(&self.engine, &self.cancels, client)
    }

    /// The row description of a prepared statement's result in `format`,
    /// from those the connection keeps (none for a statement without rows).
    fn row_description<C: ClientInfo>(
        &self,
        client: &C,
        statement: &Prepared,
        format: &Format,
    ) -> PgWireResult<Vec<FieldInfo>> {
        match &statement.result {
            Some(schema) => Ok(self.connection(client).fields(schema, format)?.to_vec()),
            None => Ok(Vec::new()),
        }
    }

    /// The client, with replies held for the Sync or Flush (extended
    /// protocol), after the idle timer is stopped by the message being
    /// handled (or has ended the session).
    fn deferred<'a, C: ClientInfo>(&self, client: &'a mut C) -> PgWireResult<Replies<'a, C>> {
        let connection = self.connection(client);
        connection.idle.message()?;
        Ok(Replies::deferred(
            client,
            &connection.notices,
            &connection.settings,
        ))
    }
}

/// The answers to a portal of a read by key that the connection keeps
/// (see `key_portal`).
impl Handlers {
    /// Bind: the parameters' values are read now, as PostgreSQL reads
    /// them, and BindComplete waits for the Sync.
    pub(super) async fn bind_kept<C>(
        &self,
        client: &mut C,
        portal: Portal<Arc<Prepared>>,
    ) -> PgWireResult<Kept>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let zone = self.connection(client).settings.zone();
        let mut replies = self.deferred(client)?;
        let values = params::values(&portal, &zone)?;
        replies
            .feed(PgWireBackendMessage::BindComplete(BindComplete::new()))
            .await?;
        Ok(Kept::new(portal, values))
    }

    /// Describe: the portal's row description.
    pub(super) async fn describe_kept<C>(&self, client: &mut C, kept: &Kept) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let portal = &kept.portal;
        let fields = self.row_description(
            client,
            &portal.statement.statement,
            &portal.result_column_format,
        )?;
        let mut replies = self.deferred(client)?;
        send_describe_response(&mut replies, &DescribePortalResponse::new(fields)).await
    }

    /// Execute for all the rows: false, with nothing sent, when the
    /// general path must run it.
    pub(super) async fn execute_kept<C>(
        &self,
        client: &mut C,
        kept: &mut Kept,
    ) -> PgWireResult<bool>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let connection = self.connection(client);
        connection.idle.message()?;
        let executed = async {
            let response = if kept.finished {
                QueryResponse::new(Arc::new(Vec::new()), futures::stream::empty())
            } else {
                let Some(rows) = read_kept(&connection, kept).await? else {
                    return Ok(false);
                };
                kept.finished = true;
                stored(rows, &kept.portal.result_column_format, &connection)?
            };
            let mut replies = Replies::deferred(client, &connection.notices, &connection.settings);
            send_rows(&mut replies, response).await?;
            Ok(true)
        };
        fail_on_error(&connection.notices, executed.await)
    }
}

/// Reads the rows of a kept portal; a cancel request stops the read.
async fn read_kept(connection: &Connection, kept: &Kept) -> PgWireResult<Option<StoredRows>> {
    let mut session = connection.session.lock().await;
    let mut cancel = connection.cancel.signal.clone();
    cancel.borrow_and_update();
    let read = tokio::select! {
        read = session.read_by_key(&kept.portal.statement.statement, &kept.values) => {
            read.map_err(to_pgwire)
        }
        Ok(()) = cancel.changed() => Err(to_pgwire(canceled())),
    };
    connection.idle.replied(&connection.session, &session);
    read
}

fn same_format(a: &Format, b: &Format) -> bool {
    match (a, b) {
        (Format::UnifiedText, Format::UnifiedText) => true,
        (Format::UnifiedBinary, Format::UnifiedBinary) => true,
        (Format::Individual(a), Format::Individual(b)) => a == b,
        _ => false,
    }
}

/// The response to one statement's output.
fn response(output: Output, format: &Format, connection: &Connection) -> PgWireResult<Response> {
    Ok(match output {
        Output::Rows {
            schema,
            stream,
            tag,
        } => Response::Query(streamed(&schema, stream, &tag, format, connection)?),
        Output::Stored(rows) => Response::Query(stored(rows, format, connection)?),
        Output::Command(tag) if tag.is_empty() => Response::EmptyQuery,
        Output::Command(tag) => Response::Execution(Tag::new(&tag)),
        Output::TransactionStart(tag) => Response::TransactionStart(Tag::new(&tag)),
        Output::TransactionEnd(tag) => Response::TransactionEnd(Tag::new(&tag)),
        Output::CopyIn { columns } => {
            Response::CopyIn(CopyResponse::new(0, columns, futures::stream::empty()))
        }
        Output::CopyOut {
            schema,
            stream,
            format,
        } => {
            let columns = schema.fields().len();
            let rows = cancellable(stream, connection.cancel.signal.clone());
            Response::CopyOut(CopyResponse::new(
                0,
                columns,
                encode::copy_rows(&schema, rows, &format, connection.settings.zone())?,
            ))
        }
    })
}

/// Rows that stream from a plan; a cancel stops them.
fn streamed(
    schema: &SchemaRef,
    stream: SendableRecordBatchStream,
    tag: &str,
    format: &Format,
    connection: &Connection,
) -> PgWireResult<QueryResponse> {
    let fields = connection.fields(schema, format)?;
    let rows = cancellable(stream, connection.cancel.signal.clone());
    let zone = connection.settings.zone();
    let mut response = QueryResponse::new(fields.clone(), encode::rows(rows, fields, zone));
    response.set_command_tag(tag);
    Ok(response)
}

/// The rows of a read by key, encoded from their stored values (through a
/// record batch when a column's type asks for it).
fn stored(
    rows: StoredRows,
    format: &Format,
    connection: &Connection,
) -> PgWireResult<QueryResponse> {
    let fields = connection.fields(rows.schema(), format)?;
    match encode::stored_rows(&rows, &fields, &connection.settings.zone())? {
        Some(data) => {
            let data = futures::stream::iter(data.into_iter().map(Ok));
            let mut response = QueryResponse::new(fields, data);
            response.set_command_tag("SELECT");
            Ok(response)
        }
        None => {
            let schema = rows.schema().clone();
            streamed(&schema, rows.into_stream()?, "SELECT", format, connection)
        }
    }
}

/// Sends a query's rows, then its CommandComplete.
async fn send_rows<C>(client: &mut C, mut response: QueryResponse) -> PgWireResult<()>
where
    C: Sink<PgWireBackendMessage> + Unpin,
    C::Error: Debug,
    PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
{
    let mut rows = 0;
    while let Some(row) = response.data_rows().next().await {
        client.feed(PgWireBackendMessage::DataRow(row?)).await?;
        rows += 1;
    }
    let tag = Tag::new(response.command_tag()).with_rows(rows);
    client
        .send(PgWireBackendMessage::CommandComplete(tag.into()))
        .await?;
    Ok(())
}

/// An error pgwire sends for a statement the session already returned
/// (one raised while its rows were read, or a cancel) fails the open
/// transaction, as any error does in PostgreSQL.
fn fail_on_error<T>(notices: &Notices, result: PgWireResult<T>) -> PgWireResult<T> {
    if result.is_err() {
        notices.error_sent();
    }
    result
}

#[async_trait]
impl SimpleQueryHandler for Handlers {
    /// pgwire's, with the session's notices sent ahead of each statement's
    /// last reply.
    async fn on_query<C>(&self, client: &mut C, query: Query) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let connection = self.connection(client);
        connection.idle.message()?;
        let mut replies = Replies::immediate(client, &connection.notices, &connection.settings);
        let result = self._on_query(&mut replies, query).await;
        replies.flush().await?;
        connection.replied().await;
        fail_on_error(&connection.notices, result)
    }

    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let connection = self.connection(client);
        let mut session = connection.session.lock().await;
        let mut responses = Vec::new();
        for output in session.execute(query).await {
            match output {
                Ok(output) => responses.push(response(output, &Format::UnifiedText, &connection)?),
                Err(e) => responses.push(Response::Error(Box::new(error_info_in(&e, query)))),
            }
        }
        Ok(responses)
    }
}

pub struct Parser {
    engine: Arc<Engine>,
    cancels: Arc<Cancels>,
}

#[async_trait]
impl QueryParser for Parser {
    type Statement = Arc<Prepared>;

    async fn parse_sql<C>(
        &self,
        client: &C,
        sql: &str,
        types: &[Option<Type>],
    ) -> PgWireResult<Option<Self::Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        let declared: Vec<_> = types
            .iter()
            .map(|t| t.as_ref().and_then(params::declared_type))
            .collect();
        let connection = connection_of(&self.engine, &self.cancels, client);
        let mut session = connection.session.lock().await;
        session
            .prepare(sql, &declared)
            .await
            .map(Some)
            .map_err(|e| PgWireError::UserError(Box::new(error_info_in(&e, sql))))
    }

    fn get_parameter_types(&self, stmt: &Self::Statement) -> PgWireResult<Vec<Type>> {
        Ok(stmt
            .param_types
            .iter()
            .map(|t| params::pg_param_type(t.as_ref()))
            .collect())
    }

    /// The trait's stateless answer; Describe is answered from the
    /// connection's kept descriptions (`Handlers::row_description`).
    fn get_result_schema(
        &self,
        stmt: &Self::Statement,
        column_format: Option<&Format>,
    ) -> PgWireResult<Vec<FieldInfo>> {
        match &stmt.result {
            Some(schema) => encode::fields(schema, column_format.unwrap_or(&Format::UnifiedBinary)),
            None => Ok(Vec::new()),
        }
    }
}

#[async_trait]
impl ExtendedQueryHandler for Handlers {
    type Statement = Arc<Prepared>;
    type QueryParser = Parser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.parser.clone()
    }

    /// pgwire's, with ParseComplete left for the Sync to send.
    async fn on_parse<C>(&self, client: &mut C, message: Parse) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut replies = self.deferred(client)?;
        PgwireDefaults(self).on_parse(&mut replies, message).await?;
        Ok(replies.flush().await?)
    }

    /// pgwire's, with BindComplete left for the Sync to send.
    async fn on_bind<C>(&self, client: &mut C, message: Bind) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let mut replies = self.deferred(client)?;
        PgwireDefaults(self).on_bind(&mut replies, message).await?;
        Ok(replies.flush().await?)
    }

    /// pgwire's, with its replies left for the Sync to send, except the
    /// start of a COPY FROM STDIN, which the client waits for.
    async fn on_execute<C>(&self, client: &mut C, message: Execute) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let connection = self.connection(client);
        let notices = connection.notices.clone();
        let mut replies = self.deferred(client)?;
        let result = self._on_execute(&mut replies, message).await;
        replies.flush().await?;
        connection.replied().await;
        fail_on_error(&notices, result)?;
        if matches!(client.state(), PgWireConnectionState::CopyInProgress(_)) {
            client.flush().await?;
        }
        Ok(())
    }

    /// pgwire's, with its replies left for the Sync to send. A portal that
    /// the protocol does not know may be a cursor made by DECLARE, which in
    /// PostgreSQL is a portal of the same name (psycopg describes it so).
    async fn on_describe<C>(&self, client: &mut C, message: Describe) -> PgWireResult<()>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let name = message.name.as_deref().unwrap_or(DEFAULT_NAME);
        if message.target_type == TARGET_TYPE_BYTE_PORTAL
            && client.portal_store().get_portal(name).is_none()
        {
            let connection = self.connection(client);
            let schema = connection.session.lock().await.cursor_schema(name);
            if let Some(schema) = schema {
                let fields = encode::fields(&schema, &Format::UnifiedText)?;
                return send_describe_response(
                    &mut self.deferred(client)?,
                    &DescribePortalResponse::new(fields),
                )
                .await;
            }
        }
        let mut replies = self.deferred(client)?;
        self._on_describe(&mut replies, message).await?;
        Ok(replies.flush().await?)
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        _max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let connection = self.connection(client);
        let values = params::values(portal, &connection.settings.zone())?;
        let mut session = connection.session.lock().await;
        let result = session
            .execute_prepared(&portal.statement.statement, values)
            .await;
        drop(session);
        match result {
            Ok(output) => response(output, &portal.result_column_format, &connection),
            Err(e) => Ok(Response::Error(Box::new(error_info(&e)))),
        }
    }

    async fn do_describe_statement<C>(
        &self,
        client: &mut C,
        stmt: &StoredStatement<Self::Statement>,
    ) -> PgWireResult<DescribeStatementResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let param_types = stmt
            .parameter_types
            .iter()
            .enumerate()
            .map(|(i, declared)| {
                declared.clone().unwrap_or_else(|| {
                    params::pg_param_type(
                        stmt.statement.param_types.get(i).and_then(Option::as_ref),
                    )
                })
            })
            .chain(
                stmt.statement
                    .param_types
                    .iter()
                    .skip(stmt.parameter_types.len())
                    .map(|t| params::pg_param_type(t.as_ref())),
            )
            .collect();
        // Formats are chosen at Bind; until then, pgwire's default.
        let fields = self.row_description(client, &stmt.statement, &Format::UnifiedBinary)?;
        Ok(DescribeStatementResponse::new(param_types, fields))
    }

    async fn do_describe_portal<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
    ) -> PgWireResult<DescribePortalResponse>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let fields = self.row_description(
            client,
            &portal.statement.statement,
            &portal.result_column_format,
        )?;
        Ok(DescribePortalResponse::new(fields))
    }
}

#[async_trait]
impl CopyHandler for Handlers {
    async fn on_copy_data<C>(&self, client: &mut C, copy_data: CopyData) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        self.connection(client)
            .session
            .clone()
            .lock()
            .await
            .copy_data(&copy_data.data);
        Ok(())
    }

    async fn on_copy_done<C>(&self, client: &mut C, _done: CopyDone) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let connection = self.connection(client);
        let result = connection.session.clone().lock().await.copy_done().await;
        let tag = result.map_err(to_pgwire)?;
        // The COPY's warnings (rows near the limits, write shape) go ahead
        // of its CommandComplete.
        let mut replies = Replies::immediate(client, &connection.notices, &connection.settings);
        replies
            .send(PgWireBackendMessage::CommandComplete(Tag::new(&tag).into()))
            .await?;
        Ok(())
    }

    async fn on_copy_fail<C>(&self, client: &mut C, fail: CopyFail) -> PgWireError
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        to_pgwire(
            self.connection(client)
                .session
                .clone()
                .lock()
                .await
                .copy_failed(&fail.message),
        )
    }
}

/// The handlers with pgwire's own Parse and Bind, which the overrides above
/// run on a [`Replies`] client (a trait's default cannot be called from
/// its override otherwise).
struct PgwireDefaults<'a>(&'a Handlers);

#[async_trait]
impl ExtendedQueryHandler for PgwireDefaults<'_> {
    type Statement = Arc<Prepared>;
    type QueryParser = Parser;

    fn query_parser(&self) -> Arc<Self::QueryParser> {
        self.0.parser.clone()
    }

    async fn do_query<C>(
        &self,
        client: &mut C,
        portal: &Portal<Self::Statement>,
        max_rows: usize,
    ) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Self::Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        <Handlers as ExtendedQueryHandler>::do_query(self.0, client, portal, max_rows).await
    }
}

#[async_trait]
impl NoopStartupHandler for Handlers {
    fn connection_manager(&self) -> Option<Arc<ConnectionManager>> {
        Some(self.connections.clone())
    }

    /// pgwire's trust startup reports its own defaults; tablegate's follow
    /// and take their place (a client keeps the last value of each).
    async fn post_startup<C>(
        &self,
        client: &mut C,
        _message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let parameters = StartupParameters
            .server_parameters(client)
            .unwrap_or_default();
        for (name, value) in parameters {
            client
                .feed(PgWireBackendMessage::ParameterStatus(ParameterStatus::new(
                    name, value,
                )))
                .await?;
        }
        Ok(())
    }
}

/// The handlers of logins and cancel requests, made for each connection.
impl Handlers {
    /// A login: trust, or a SCRAM exchange whose state is the connection's.
    pub fn startup(&self) -> Arc<Startup> {
        Arc::new(match &self.authentication {
            Authentication::Trust => Startup::Trust(self.clone_ref()),
            Authentication::Scram(users) => Startup::Scram(
                SASLAuthStartupHandler::new(Arc::new(StartupParameters))
                    .with_scram(ScramAuth::new(Arc::new(super::auth::Logins {
                        users: users.clone(),
                        catalog: self.engine.catalog.clone(),
                    })))
                    .with_connection_manager(self.connections.clone()),
            ),
        })
    }

    pub fn canceller(&self) -> Arc<Canceller> {
        Arc::new(Canceller::new(
            self.connections.clone(),
            self.cancels.clone(),
        ))
    }
}

impl Handlers {
    fn clone_ref(&self) -> Handlers {
        Handlers {
            engine: self.engine.clone(),
            parser: self.parser.clone(),
            authentication: self.authentication.clone(),
            connections: self.connections.clone(),
            cancels: self.cancels.clone(),
        }
    }
}
