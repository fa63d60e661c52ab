//! The tokens the bridge holds for one server, kept in a file only the user can read (mode
//! 0600, written whole through a temporary file and a rename), so a host's next launch of the
//! bridge needs no new authorization.
//!
//! It owns the file and when a token is due for refresh, not getting tokens (`super::flow`).

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::oauth;
use crate::{Error, OAuthStep};

/// Refresh this long before a token expires, or at half its life when that is shorter.
const REFRESH_MARGIN: Duration = Duration::from_secs(60);

/// What is kept for one server.
#[derive(Clone, Deserialize, Serialize)]
pub(crate) struct Tokens {
    /// The MCP server these are for (a file never serves another).
    pub(crate) resource: String,
    /// The authorization server that issued them.
    pub(crate) issuer: String,
    pub(crate) token_endpoint: String,
    pub(crate) client_id: String,
    pub(crate) access_token: String,
    pub(crate) refresh_token: Option<String>,
    /// When the access token was issued and when it expires (seconds since the epoch);
    /// `expires_at` is absent when the server did not say.
    pub(crate) issued_at: u64,
    pub(crate) expires_at: Option<u64>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokens")
            .field("resource", &self.resource)
            .field("issuer", &self.issuer)
            .field("expires_at", &self.expires_at)
            .finish_non_exhaustive()
    }
}

impl Tokens {
    /// When to refresh: `REFRESH_MARGIN` before expiry, or at half the token's life if that is
    /// later; `None` for a token without an expiry.
    pub(crate) fn refresh_at(&self) -> Option<u64> {
        let expires = self.expires_at?;
        let half_life = self.issued_at + expires.saturating_sub(self.issued_at) / 2;
        Some(expires.saturating_sub(REFRESH_MARGIN.as_secs()).max(half_life))
    }

    /// Whether the access token is still good for a while.
    pub(crate) fn fresh(&self, now: u64) -> bool {
        self.refresh_at().is_none_or(|at| now < at)
    }
}

/// Seconds since the epoch.
pub(crate) fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The default file for `resource`: `$XDG_STATE_HOME/forkless/oauth/<hash>.json` (or
/// `~/.local/state/…`), one per server URL.
pub(crate) fn default_file(resource: &str) -> Result<PathBuf, Error> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .ok_or_else(|| {
            oauth(OAuthStep::TokenFile, "neither XDG_STATE_HOME nor HOME is set; give --oauth-token-file")
        })?;
    let digest = <sha2::Sha256 as sha2::Digest>::digest(resource.as_bytes());
    let name: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
    Ok(base.join("forkless/oauth").join(format!("{name}.json")))
}

/// The tokens in `path` for `resource`; `None` when there are none (no file, another server's).
pub(crate) fn load(path: &Path, resource: &str) -> Result<Option<Tokens>, Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(oauth(OAuthStep::TokenFile, format!("{}: {e}", path.display()))),
    };
    let mode = std::fs::metadata(path)
        .map_err(|e| oauth(OAuthStep::TokenFile, format!("{}: {e}", path.display())))?;
    if mode.permissions().mode() & 0o077 != 0 {
        return Err(oauth(
            OAuthStep::TokenFile,
            format!(
                "{} can be read by others (mode {:o}); chmod 600 it or remove it",
                path.display(),
                mode.permissions().mode() & 0o777
            ),
        ));
    }
    let tokens: Tokens = serde_json::from_str(&text)
        .map_err(|e| oauth(OAuthStep::TokenFile, format!("{}: not a token file ({e})", path.display())))?;
    Ok((tokens.resource == resource).then_some(tokens))
}

/// Write `tokens` to `path`, readable by the user only.
pub(crate) fn save(path: &Path, tokens: &Tokens) -> Result<(), Error> {
    let fail = |e: std::io::Error| oauth(OAuthStep::TokenFile, format!("{}: {e}", path.display()));
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(fail)?;
    }
    let temporary = path.with_extension("json.tmp");
    let _ = std::fs::remove_file(&temporary);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .map_err(fail)?;
    let text = serde_json::to_vec_pretty(tokens).map_err(|e| oauth(OAuthStep::TokenFile, e.to_string()))?;
    file.write_all(&text).and_then(|()| file.sync_all()).map_err(fail)?;
    std::fs::rename(&temporary, path).map_err(fail)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(issued_at: u64, expires_at: Option<u64>) -> Tokens {
        Tokens {
            resource: "https://mcp.example.com/mcp".into(),
            issuer: "https://auth.example.com".into(),
            token_endpoint: "https://auth.example.com/token".into(),
            client_id: "c".into(),
            access_token: "a".into(),
            refresh_token: Some("r".into()),
            issued_at,
            expires_at,
        }
    }

    #[test]
    fn a_token_is_refreshed_a_minute_early_or_at_half_life() {
        assert_eq!(tokens(1000, Some(4600)).refresh_at(), Some(4540));
        assert_eq!(tokens(1000, Some(1010)).refresh_at(), Some(1005));
        assert_eq!(tokens(1000, None).refresh_at(), None);
        assert!(tokens(1000, Some(4600)).fresh(4539));
        assert!(!tokens(1000, Some(4600)).fresh(4540));
        assert!(tokens(1000, None).fresh(u64::MAX));
    }

    #[test]
    fn the_file_is_the_users_alone_and_names_its_server() {
        let dir = std::env::temp_dir().join(format!("forkless-tokens-{}", std::process::id()));
        let path = dir.join("t.json");
        let t = tokens(1, Some(2));
        save(&path, &t).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(load(&path, &t.resource).unwrap().unwrap().access_token, "a");
        assert!(load(&path, "https://other/mcp").unwrap().is_none(), "another server's tokens are not used");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let refused = load(&path, &t.resource).unwrap_err().to_string();
        assert!(refused.contains("can be read by others"), "{refused}");
        assert!(load(&dir.join("missing.json"), &t.resource).unwrap().is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
