//! Spent one-time keys in Redis: one script ([`crate::scripts::SPEND`]) that checks the boot
//! is vouched for, refuses a key issued before the spent keys are known from, and stores the
//! key with `SET … NX PXAT` (Redis forgets it once its time passes). It owns this call, not
//! what a spend means (see `forkless_store::Spending::spend`).
//!
//! A restart of Redis that may have lost writes moves "known from" to when the new boot was
//! vouched for (see the crate docs, "A lost suffix is never numbered over"), so a key spent
//! before it and forgotten can never be spent again as if new.

use std::sync::LazyLock;

use forkless_core::Timestamp;
use forkless_store::{Error, Result, SpendKey, Spent};
use redis::Script;

use crate::keys::key_bucket;
use crate::{Redis, backend, scripts};

static SPEND: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::SPEND));

impl Redis {
    /// Spend `key`; vouch for a new boot of Redis first if it needs it.
    pub(crate) async fn spend_key(
        &self,
        key: SpendKey,
        issued: Timestamp,
        until: Timestamp,
        now: Timestamp,
    ) -> Result<Spent> {
        for _ in 0..2 {
            let b = key_bucket(&key.0);
            let code: i64 = SPEND
                .key(self.keys.run(b))
                .key(self.keys.spent_since(b))
                .key(self.keys.spent(&key.0))
                .arg(issued.as_millis())
                .arg(until.as_millis().max(1))
                .arg(now.as_millis())
                .invoke_async(&mut self.conn.clone())
                .await
                .map_err(backend)?;
            match code {
                1 => return Ok(Spent::Now),
                0 => return Ok(Spent::Before),
                2 => return Ok(Spent::Unvouched),
                -3 => self.vouch_all().await?,
                other => {
                    return Err(Error::Backend(format!(
                        "redis: unexpected reply {other} from the spend script"
                    )));
                }
            }
        }
        Err(Error::Backend("redis: restarted again while its history was checked".into()))
    }
}
