//! `--store`: which store a server keeps its sessions in, parsed strictly, and shown in logs
//! without any password.

use core::fmt;
use core::str::FromStr;
use std::path::PathBuf;

/// The store a server keeps its sessions in. Parsed from `--store`.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreSpec {
    /// In-process memory: fast, lost on exit.
    Memory,
    /// The durable embedded store: this file, or `forkless.redb` in `--data-dir`.
    Redb(Option<PathBuf>),
    /// A PostgreSQL database, by its `postgres://` or `postgresql://` URL.
    Postgres(String),
    /// A Redis server, by its `redis://` or `rediss://` URL.
    Redis(String),
}

/// Why a `--store` value was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreSpecError {
    /// A store this build knows of but cannot open yet.
    #[error(
        "store `{0}` is not available in this build (available: redb, redb:PATH, memory, postgres://URL, redis://URL)"
    )]
    Unavailable(String),
    /// Not a store name at all.
    #[error("unknown store `{0}` (available: redb, redb:PATH, memory, postgres://URL, redis://URL)")]
    Unknown(String),
}

impl FromStr for StoreSpec {
    type Err = StoreSpecError;

    fn from_str(s: &str) -> Result<Self, StoreSpecError> {
        match s.split_once(':').map_or(s, |(kind, _)| kind) {
            "memory" if s == "memory" => Ok(Self::Memory),
            "redb" if s == "redb" => Ok(Self::Redb(None)),
            "redb" => match &s[5..] {
                "" => Err(StoreSpecError::Unknown(s.to_owned())),
                path => Ok(Self::Redb(Some(PathBuf::from(path)))),
            },
            "postgres" | "postgresql" if s.contains("://") => Ok(Self::Postgres(s.to_owned())),
            "postgres" | "postgresql" => Err(StoreSpecError::Unknown(s.to_owned())),
            "redis" | "rediss" if s.contains("://") => Ok(Self::Redis(s.to_owned())),
            "redis" | "rediss" => Err(StoreSpecError::Unknown(s.to_owned())),
            _ => Err(StoreSpecError::Unknown(s.to_owned())),
        }
    }
}

impl fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Memory => f.write_str("memory"),
            Self::Redb(None) => f.write_str("redb"),
            Self::Redb(Some(path)) => write!(f, "redb:{}", path.display()),
            Self::Postgres(url) | Self::Redis(url) => f.write_str(&without_password(url)),
        }
    }
}

/// `url` with any password in it replaced by `***`, for logs and banners.
fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else { return url.to_owned() };
    let (authority, tail) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((userinfo, host)) if userinfo.contains(':') => {
            let user = userinfo.split_once(':').map_or(userinfo, |(u, _)| u);
            format!("{scheme}://{user}:***@{host}{tail}")
        }
        _ => url.to_owned(),
    }
}
