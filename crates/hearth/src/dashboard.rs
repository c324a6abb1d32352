//! What the dashboard on the admin listener (`--admin`) shows and does
//! for `hearth serve` and `hearth work`: the control socket's status
//! report, `hearth work`'s queue and its dead jobs, and the operator's
//! actions (reload; retry, delete or purge jobs), given the admin token.

use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context as _};
use hearth_http::admin::{is_public, AdminToken};
use hearth_http::dashboard::{Action, Boxed, Dashboard, Refusal};
use http::StatusCode;
use serde_json::Value;

use crate::control::{ControlState, Engine};

/// The dashboard of a running command.
#[derive(Debug)]
pub struct Panel {
    state: Arc<ControlState>,
}

impl Panel {
    pub fn new(state: Arc<ControlState>) -> Arc<Panel> {
        Arc::new(Panel { state })
    }
}

impl Dashboard for Panel {
    fn command(&self) -> &'static str {
        match self.state.engine {
            Engine::Other(_) => "work",
            _ => "serve",
        }
    }

    fn status(&self) -> Boxed<'_, Value> {
        Box::pin(crate::control::report(&self.state))
    }

    fn queues(&self) -> Boxed<'_, Vec<Value>> {
        match &self.state.engine {
            Engine::Other(other) => other.queues(),
            _ => Box::pin(async { Vec::new() }),
        }
    }

    fn jobs_sample(&self) -> Option<Value> {
        match &self.state.engine {
            Engine::Other(other) => other.jobs_sample(),
            _ => None,
        }
    }

    fn act(&self, action: Action) -> Boxed<'_, Result<String, Refusal>> {
        Box::pin(async move {
            match action {
                Action::Reload => {
                    tracing::info!("reload asked for on the dashboard");
                    crate::control::reload(&self.state)
                        .await
                        .map(|done| done.message)
                        .map_err(|e| Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, e))
                }
                action => match &self.state.engine {
                    Engine::Other(other) => other.queue_action(action).await,
                    _ => Err(Refusal::new(
                        StatusCode::NOT_FOUND,
                        "no such queue: hearth serve has none (hearth work does)",
                    )),
                },
            }
        })
    }
}

/// The admin token from `admin_token` (in the configuration file) or the
/// file `admin_token_file` names; none when neither is set.
pub fn token(inline: Option<&str>, file: Option<&Path>) -> anyhow::Result<Option<AdminToken>> {
    match (inline, file) {
        (Some(_), Some(_)) => bail!("admin_token and admin_token_file: give one, not both"),
        (Some(token), None) => AdminToken::new(token)
            .map(Some)
            .map_err(|e| anyhow::anyhow!("admin_token: {e}")),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("admin token file {}", path.display()))?;
            warn_if_readable(path);
            AdminToken::new(&text)
                .map(Some)
                .map_err(|e| anyhow::anyhow!("admin token file {}: {e}", path.display()))
        }
        (None, None) => Ok(None),
    }
}

/// Says so when other users may read the token file.
fn warn_if_readable(path: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o004 != 0 {
            tracing::warn!(
                "the admin token file {} can be read by every user: make it mode 0600 or 0640",
                path.display()
            );
        }
    }
}

/// Refuses an admin address other networks can reach when no token is
/// set: its dashboard would be open to them.
pub fn check_address(addr: std::net::SocketAddr, token: Option<&AdminToken>) -> anyhow::Result<()> {
    if token.is_none() && is_public(addr) {
        bail!(
            "--admin {addr}: this address can be reached from other networks, and the admin \
             listener has no token; listen on a loopback or private address (127.0.0.1:{port}, \
             10.0.0.5:{port}), or set an admin token (admin_token in hearth.toml, or \
             --admin-token-file)",
            port = addr.port()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_public_address_needs_a_token() {
        let token = AdminToken::new("0123456789abcdef").expect("token");
        let public = "0.0.0.0:9090".parse().expect("addr");
        let message = check_address(public, None)
            .expect_err("refused")
            .to_string();
        assert!(message.contains("--admin 0.0.0.0:9090"), "{message}");
        assert!(check_address(public, Some(&token)).is_ok());
        assert!(check_address("127.0.0.1:9090".parse().expect("addr"), None).is_ok());
    }

    #[test]
    fn the_token_comes_from_the_file_or_the_key() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("token");
        std::fs::write(&path, "0123456789abcdef0123\n").expect("write");
        assert!(token(None, Some(&path)).expect("read").is_some());
        assert!(token(Some("0123456789abcdef"), None)
            .expect("key")
            .is_some());
        assert!(token(None, None).expect("none").is_none());
        let both = token(Some("0123456789abcdef"), Some(&path)).expect_err("both");
        assert!(both.to_string().contains("not both"), "{both}");
        let missing = dir.path().join("missing");
        let e = token(None, Some(&missing)).expect_err("missing");
        assert!(format!("{e:#}").contains("admin token file"), "{e:#}");
        std::fs::write(&path, "short\n").expect("write");
        let e = token(None, Some(&path)).expect_err("short");
        assert!(e.to_string().contains("at least 16"), "{e}");
    }
}
