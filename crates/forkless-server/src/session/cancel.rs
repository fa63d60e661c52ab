//! A client request's cancellation token, made the first time something asks for it.
//!
//! Most requests are answered without anyone asking (their handler never looks at it, nobody
//! sends `notifications/cancelled`), and a token made as a child of the session's costs an
//! allocation and two locks of the session's token per request. This module owns when the
//! token is made; who cancels it is [`super::SessionShared`]'s and the handler's.

use std::sync::{Arc, OnceLock};

use tokio_util::sync::CancellationToken;

/// A request's cancellation: a child of its session's token, made on first use (or given
/// made, for a request whose token is not its session's child).
#[derive(Clone, Debug, Default)]
pub(crate) struct RequestCancel(Arc<OnceLock<CancellationToken>>);

impl RequestCancel {
    /// A token made already (a stateless request's, which closing its response cancels).
    pub(crate) fn made(token: CancellationToken) -> Self {
        Self(Arc::new(OnceLock::from(token)))
    }

    /// The token, made now as a child of `session`'s if nothing asked for it before (a child
    /// of a cancelled token is born cancelled).
    pub(crate) fn token(&self, session: &CancellationToken) -> &CancellationToken {
        self.0.get_or_init(|| session.child_token())
    }

    /// Whether it is cancelled, without making it: a token nobody made is cancelled exactly
    /// when its session's is.
    pub(crate) fn is_cancelled(&self, session: &CancellationToken) -> bool {
        match self.0.get() {
            Some(token) => token.is_cancelled(),
            None => session.is_cancelled(),
        }
    }

    /// Cancel it (`notifications/cancelled`).
    pub(crate) fn cancel(&self, session: &CancellationToken) {
        self.token(session).cancel();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_lazily_as_the_session_s_child() {
        let session = CancellationToken::new();
        let cancel = RequestCancel::default();
        assert!(!cancel.is_cancelled(&session));
        cancel.cancel(&session);
        assert!(cancel.is_cancelled(&session) && !session.is_cancelled(), "a request's cancel is its own");
        let clone = cancel.clone();
        assert!(clone.token(&session).is_cancelled(), "clones share the one token");

        // Never made: the session's end cancels it all the same, before or after it is made.
        let (session, unmade, made) =
            (CancellationToken::new(), RequestCancel::default(), RequestCancel::default());
        let token = made.token(&session).clone();
        session.cancel();
        assert!(unmade.is_cancelled(&session) && unmade.token(&session).is_cancelled());
        assert!(token.is_cancelled() && made.is_cancelled(&session));
    }

    #[test]
    fn a_made_token_is_not_the_session_s() {
        let (session, own) = (CancellationToken::new(), CancellationToken::new());
        let cancel = RequestCancel::made(own.clone());
        session.cancel();
        assert!(!cancel.is_cancelled(&session), "a made token answers for itself");
        own.cancel();
        assert!(cancel.token(&session).is_cancelled());
    }
}
