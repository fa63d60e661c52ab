//! The process's open-file limit: raised at start where allowed, and read to cap
//! `max_connections`.

/// Raise the soft open-file limit to the hard limit where the OS allows it, and return the
/// limit in force (`None` where it cannot be read).
pub fn raise_open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        use rustix::process::{Resource, getrlimit, setrlimit};
        let limit = getrlimit(Resource::Nofile);
        let (soft, hard) = (limit.current, limit.maximum);
        if soft < hard {
            let raised = rustix::process::Rlimit { current: hard, maximum: hard };
            match setrlimit(Resource::Nofile, raised) {
                Ok(()) => tracing::info!(from = ?soft, to = ?hard, "raised the open-file limit"),
                Err(e) => tracing::info!(error = %e, "could not raise the open-file limit"),
            }
        }
        getrlimit(Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The open-file limit in force, if known.
pub(crate) fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}
