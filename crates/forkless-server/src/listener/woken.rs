//! A future polled only when it was woken: for the connection task's control events (its
//! deadline, shutdown, being dropped to make room), which would otherwise be polled again on
//! every wake-up of the connection itself, several times per request.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, Wake, Waker};

use futures::task::AtomicWaker;

struct Flag {
    woken: AtomicBool,
    parent: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.parent.wake();
    }
}

/// `fut`, polled by [`Self::poll_if_woken`] only after its own waker fired (and the first time).
pub(crate) struct WokenOnly<F> {
    fut: Pin<Box<F>>,
    flag: Arc<Flag>,
    waker: Waker,
}

impl<F: Future> WokenOnly<F> {
    pub(crate) fn new(fut: F) -> Self {
        let flag = Arc::new(Flag { woken: AtomicBool::new(true), parent: AtomicWaker::new() });
        let waker = Waker::from(flag.clone());
        Self { fut: Box::pin(fut), flag, waker }
    }

    /// Poll the future if it was woken since it was last polled; `Pending` otherwise. The
    /// caller's task is woken when the future is.
    pub(crate) fn poll_if_woken(&mut self, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.flag.parent.register(cx.waker());
        if !self.flag.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        self.fut.as_mut().poll(&mut Context::from_waker(&self.waker))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;

    /// Counts its polls; ready once `ready` is set.
    struct Probe {
        polls: Arc<AtomicUsize>,
        ready: Arc<AtomicBool>,
        waker: Arc<std::sync::Mutex<Option<Waker>>>,
    }

    impl Future for Probe {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::SeqCst);
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
            if self.ready.load(Ordering::SeqCst) { Poll::Ready(()) } else { Poll::Pending }
        }
    }

    #[test]
    fn polled_once_then_only_after_its_waker_fires() {
        let (polls, ready, waker) =
            (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicBool::new(false)), Arc::default());
        let mut w =
            WokenOnly::new(Probe { polls: polls.clone(), ready: ready.clone(), waker: Arc::clone(&waker) });
        let noop = Waker::noop();
        let mut cx = Context::from_waker(noop);
        for _ in 0..5 {
            assert!(w.poll_if_woken(&mut cx).is_pending());
        }
        assert_eq!(polls.load(Ordering::SeqCst), 1, "only the first poll reached it");
        ready.store(true, Ordering::SeqCst);
        waker.lock().unwrap().take().unwrap().wake();
        assert!(w.poll_if_woken(&mut cx).is_ready());
        assert_eq!(polls.load(Ordering::SeqCst), 2);
    }
}
