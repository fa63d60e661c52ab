//! The MCP endpoint's three methods, and what the listener hands each request to
//! ([`Dispatch`]): a POST to the endpoint goes straight to [`post`], with the router's two
//! checks (the node stopped, the bearer token) made inline in the same order; everything else
//! goes through the axum router ([`crate::Server::router`], which applications may also mount
//! themselves). The POST is the hot path: the router's path match, method match and two
//! middleware layers (each a boxed future) are work every request repeated for nothing.
//!
//! It owns that choice, not what the endpoints do (`crate::post`, `crate::get`, …).

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::response::Response;
use forkless_store::Store;
use futures::future::BoxFuture;
use tower::ServiceExt as _;

use crate::error::Error;
use crate::handler::Handler;
use crate::server::App;

/// What the listener calls with each request.
pub(crate) type Dispatch = Arc<dyn Fn(Request) -> BoxFuture<'static, Response> + Send + Sync>;

/// The dispatch of a server: `direct` sends the endpoint's POSTs past the router.
pub(crate) fn dispatch<S: Store, H: Handler>(
    router: Router,
    app: App<S, H>,
    auth: Option<Arc<crate::auth::Authenticator>>,
    direct: bool,
) -> Dispatch {
    let path: Arc<str> = app.common.cfg.path.as_str().into();
    Arc::new(move |mut request: Request| {
        if direct && request.method() == http::Method::POST && request.uri().path() == &*path {
            let (app, auth) = (app.clone(), auth.clone());
            let stopped = Arc::clone(&app.common.stopped);
            return Box::pin(crate::stopped::guard(stopped, async move {
                if let Some(auth) = &auth
                    && let Err(refused) = crate::auth::admit(auth, &mut request).await
                {
                    return refused;
                }
                post(State(app), request).await
            }));
        }
        let router = router.clone();
        Box::pin(async move {
            match router.oneshot(request).await {
                Ok(response) => response,
                Err(never) => match never {},
            }
        })
    })
}

// The endpoints take the whole request and borrow its headers: the `HeaderMap` extractor
// would copy them for every request.

pub(crate) async fn post<S: Store, H: Handler>(State(app): State<App<S, H>>, request: Request) -> Response {
    let request = match app.route(request).await {
        Ok(here) => here,
        Err(answered) => return answered,
    };
    let (parts, body) = request.into_parts();
    let peer = parts.extensions.get::<crate::quota::PeerAddr>().copied();
    let out = app.post(&parts.headers, peer, body).await;
    app.answer(out)
}

pub(crate) async fn get<S: Store, H: Handler>(State(app): State<App<S, H>>, request: Request) -> Response {
    // axum routes HEAD to GET handlers; a HEAD must not attach (and maybe end) anything.
    if request.method() == http::Method::HEAD {
        return app.answer(Err(Error::MethodNotAllowed { allow: "GET, POST, DELETE" }));
    }
    let out = app.get(request.headers()).await;
    app.answer(out)
}

pub(crate) async fn delete<S: Store, H: Handler>(State(app): State<App<S, H>>, request: Request) -> Response {
    let request = match app.route(request).await {
        Ok(here) => here,
        Err(answered) => return answered,
    };
    let out = app.delete(request.headers()).await;
    app.answer(out)
}
