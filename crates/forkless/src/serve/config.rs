//! `forkless serve`'s flags turned into a checked [`ServerConfig`] and the durable store's
//! [`Durability`]: every flag's meaning in one place, refused with a message naming it.

use core::time::Duration;
use std::path::PathBuf;

use forkless_core::{Config as CoreConfig, ResumeMode};
use forkless_server::auth::{AuthConfig, JwksSource};
use forkless_server::request_state::RequestStateKeys;
use forkless_server::{AllowedOrigins, AnswerMode, ServerConfig};
use forkless_store::shared::Pipeline;
use forkless_store_redb::Durability;

use super::{Answer, ServeArgs, StoreSpec};
use crate::Error;

impl ServeArgs {
    /// The durable store's durability these flags describe.
    pub fn durability(&self) -> Durability {
        match self.durability {
            DurabilityArg::Immediate => Durability::Immediate,
            DurabilityArg::Batched => {
                Durability::Batched { window: Duration::from_millis(self.batch_window) }
            }
        }
    }

    /// When a notification's append returns on a shared store.
    pub fn pipeline(&self) -> Pipeline {
        match self.durability {
            DurabilityArg::Immediate => Pipeline::Off,
            DurabilityArg::Batched => Pipeline::On,
        }
    }

    /// This node's lease on a shared store (`--node-id`, `--lease-ttl`, `--advertise`).
    pub fn lease(&self) -> Option<forkless_server::node::Lease> {
        self.node_id.as_ref().map(|node| forkless_server::node::Lease {
            node: node.clone(),
            ttl: Duration::from_millis(self.lease_ttl),
            advertise: self.advertise.clone(),
        })
    }

    /// The Redis TLS settings of `--redis-ca`, `--redis-cert`/`--redis-key`, `--redis-insecure`.
    pub fn redis_tls(&self) -> forkless_store_redis::tls::RedisTls {
        use forkless_store_redis::tls::{RedisTls, Verify};
        RedisTls {
            ca_file: self.redis_ca.clone(),
            client: self.redis_cert.clone().zip(self.redis_key.clone()),
            verify: if self.redis_insecure { Verify::Off } else { Verify::Full },
        }
    }

    /// The checked server configuration these flags describe.
    pub fn server_config(&self) -> Result<ServerConfig, Error> {
        if self.node_id.is_some() && !matches!(self.store, StoreSpec::Postgres(_) | StoreSpec::Redis(_)) {
            return Err(Error::Config("--node-id needs a shared store (postgres://… or redis://…)".into()));
        }
        if self.lease_ttl < 300 {
            return Err(Error::Config(format!(
                "--lease-ttl {} ms is too short (at least 300 ms)",
                self.lease_ttl
            )));
        }
        let mut core = CoreConfig::default();
        if self.strict {
            core.mode = ResumeMode::Strict;
        }
        if let Some(ms) = self.grace {
            core.grace = Duration::from_millis(ms);
            // Keep-alives renew liveness, so they must come well within a shortened grace
            // window; a third of it leaves room for two lost ones.
            core.keep_alive = core.keep_alive.min(core.grace / 3);
        }
        let mut config = ServerConfig {
            path: self.path.clone(),
            core,
            answer: match self.answer {
                Answer::Sse => AnswerMode::Sse,
                Answer::Json => AnswerMode::Json,
            },
            allowed_origins: allowed_origins(&self.allowed_origins),
            poll_after: self.poll_after.map(Duration::from_millis),
            revisions: self.revisions,
            ..ServerConfig::default()
        };
        if let Some(n) = self.max_tasks {
            config.tasks.max_tasks = n;
        }
        if let Some(n) = self.max_tasks_per_principal {
            config.tasks.max_tasks_per_principal = n;
        }
        if let Some(ms) = self.task_ttl {
            config.tasks.ttl = Duration::from_millis(ms);
        }
        if let Some(ms) = self.idempotency_ttl {
            config.idempotency.ttl = Duration::from_millis(ms);
        }
        if let Some(bytes) = self.max_body_bytes {
            config.max_body_bytes = bytes;
        }
        if let Some(ms) = self.header_read_timeout {
            config.header_read_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = self.idle_timeout {
            config.idle_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = self.body_read_timeout {
            config.body_read_timeout = Duration::from_millis(ms);
        }
        if let Some(ms) = self.health_timeout {
            config.health_timeout = Duration::from_millis(ms);
        }
        if let Some(n) = self.max_connections {
            config.max_connections = n;
        }
        if let Some(n) = self.max_sessions_per_principal {
            config.quotas.max_sessions_per_principal = n;
        }
        config.quotas.trusted_proxies.clone_from(&self.trusted_proxies);
        if self.at_capacity.as_deref() == Some("refuse") {
            config.quotas.at_capacity = forkless_server::AtCapacity::Refuse;
        }
        if let Some(n) = self.max_sessions {
            config.max_sessions = n;
        }
        if let Some(bytes) = self.max_retained_bytes {
            config.max_retained_bytes = bytes;
        }
        if let Some(bytes) = self.max_retained_bytes_per_principal {
            config.quotas.max_retained_bytes_per_principal = bytes;
        }
        config.transport = match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => forkless_server::Transport::Tls(std::sync::Arc::new(
                forkless_server::TlsIdentity::load(cert, key).map_err(|e| Error::Config(e.to_string()))?,
            )),
            _ if self.h2c => forkless_server::Transport::Cleartext,
            _ => forkless_server::Transport::Http1,
        };
        if let (Some(issuer), Some(jwks)) = (&self.auth_issuer, &self.auth_jwks) {
            let source = if jwks.starts_with("http://") || jwks.starts_with("https://") {
                JwksSource::Url(jwks.clone())
            } else {
                JwksSource::File(PathBuf::from(jwks))
            };
            let audience = self.auth_audience.clone().unwrap_or_else(|| {
                let scheme = if self.tls_cert.is_some() { "https" } else { "http" };
                format!("{scheme}://{}{}", self.listen, self.path)
            });
            let mut auth = AuthConfig::new(issuer.clone(), audience, source);
            auth.scopes = self.auth_scopes.clone();
            if let Some(ca) = &self.auth_jwks_ca {
                // Read now, so a bad file stops the start instead of every token's check.
                forkless_tls::pem::certificates(ca)
                    .map_err(|e| Error::Config(format!("--auth-jwks-ca {e}")))?;
                auth.jwks_ca_file = Some(ca.clone());
            }
            config.auth = Some(auth);
        }
        if let Some(path) = &self.request_state_keys {
            let text = std::fs::read_to_string(path)
                .map_err(|e| Error::Config(format!("--request-state-keys {}: {e}", path.display())))?;
            config.request_state.keys = RequestStateKeys::parse(&text)
                .map_err(|e| Error::Config(format!("--request-state-keys {}: {e}", path.display())))?;
        }
        config.validate().map_err(|e| Error::Config(e.to_string()))?;
        Ok(config)
    }
}

/// `--allowed-origin` values: none means local origins only (DNS-rebinding protection), `*`
/// means any origin, anything else is an exact list.
pub(super) fn allowed_origins(flags: &[String]) -> AllowedOrigins {
    if flags.is_empty() {
        AllowedOrigins::Localhost
    } else if flags.iter().any(|o| o == "*") {
        AllowedOrigins::Any
    } else {
        AllowedOrigins::List(flags.to_vec())
    }
}

/// `--durability`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum DurabilityArg {
    /// Every event is on disk before it is acknowledged or sent.
    Immediate,
    /// One fsync per batch window.
    #[default]
    Batched,
}
