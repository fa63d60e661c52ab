//! HAProxy as the tests' load balancer: round-robin, no stickiness, in the foreground; a
//! request whose node refuses the connection (a killed node) is sent to another one
//! (`option redispatch`), as a production balancer is configured.

use std::process::Stdio;
use std::time::Duration;

/// HAProxy in the foreground in front of `backends`, on a free port; killed when dropped.
pub struct Haproxy {
    _child: tokio::process::Child,
    pub url: String,
    _dir: std::path::PathBuf,
}

impl Haproxy {
    pub async fn start(backends: &[String]) -> Option<Self> {
        if std::process::Command::new("haproxy").arg("-v").output().is_err() {
            forkless_store::skip::skip("no haproxy", &"`haproxy -v` does not run");
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let dir = super::fresh_data_dir();
        let servers: String =
            backends.iter().enumerate().map(|(i, addr)| format!("  server n{i} {addr}\n")).collect();
        let cfg = format!(
            "global\n  maxconn 2000\ndefaults\n  mode http\n  timeout connect 2s\n  timeout client 120s\n  \
             timeout server 120s\n  option http-server-close\n  retries 3\n  option redispatch 1\nfrontend fe\n  bind 127.0.0.1:{port}\n  \
             default_backend nodes\nbackend nodes\n  balance roundrobin\n{servers}"
        );
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, cfg).unwrap();
        let child = tokio::process::Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("start haproxy");
        // Ready once it accepts connections.
        super::guard("haproxy accepts", async {
            while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        Some(Self { _child: child, url: format!("http://127.0.0.1:{port}/mcp"), _dir: dir })
    }
}
