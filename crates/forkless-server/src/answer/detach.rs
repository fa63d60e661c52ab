//! Running a request whatever happens to the connection that asked: a future polled once in
//! place and, only if it is not done then, finished in a task of its own.
//!
//! This module owns that hand-off; what runs is [`super::run`]'s.

use std::future::Future;

use futures::FutureExt as _;

/// A future started by [`start_detached`].
pub(crate) enum Detached<T> {
    /// It finished on its first poll.
    Done(T),
    /// It is running in a task of its own.
    Running(tokio::task::JoinHandle<T>),
}

impl<T> Detached<T> {
    /// Wait for the outcome (an error if the task panicked or was aborted).
    pub(crate) async fn finish(self) -> Result<T, tokio::task::JoinError> {
        match self {
            Self::Done(v) => Ok(v),
            Self::Running(task) => task.await,
        }
    }
}

/// Poll `fut` once here and, if it is not done, finish it in a task of its own, so that it
/// runs to the end whatever happens to the caller. Most requests are done on their first poll
/// and so cost no task, no wake-up and no hand-off between tasks.
pub(crate) fn start_detached<F>(fut: F) -> Detached<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let mut fut = Box::pin(fut);
    match (&mut fut).now_or_never() {
        Some(v) => Detached::Done(v),
        None => Detached::Running(tokio::spawn(fut)),
    }
}
