//! Walking a query page by page, so callers never hold more than one page.

use super::{Continuation, EntityRead, Page, Query, Result};
use crate::model::Entity;

/// Calls `visit` with every page of the query, following continuation tokens,
/// until the query is exhausted or `visit` returns `false`.
pub async fn for_each_page<R, F>(store: &R, table: &str, query: &Query, mut visit: F) -> Result<()>
where
    R: EntityRead + ?Sized,
    F: FnMut(Page) -> bool,
{
    let mut continuation: Option<Continuation> = None;
    loop {
        let page = store.query(table, query, continuation.as_ref()).await?;
        continuation = page.continuation.clone();
        if !visit(page) {
            return Ok(());
        }
        if continuation.is_none() {
            return Ok(());
        }
    }
}

/// Every entity of the query, collected. For tests and small results only:
/// large results should use [`for_each_page`].
pub async fn query_all<R: EntityRead + ?Sized>(
    store: &R,
    table: &str,
    query: &Query,
) -> Result<Vec<Entity>> {
    let mut out = Vec::new();
    for_each_page(store, table, query, |page| {
        out.extend(page.entities);
        true
    })
    .await?;
    Ok(out)
}
