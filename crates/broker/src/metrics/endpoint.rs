//! The HTTP endpoint on `krabka.metrics.listener`: `GET /metrics`
//! (Prometheus text), `GET /healthz` and `GET /readyz` (JSON, for
//! Kubernetes probes: 200 when alive / ready, 503 otherwise).
//!
//! A scrape or a probe is one small GET, so this is a minimal HTTP/1.1
//! server on tokio rather than a web framework: read the request head
//! (bounded in size and time), answer, close. Anything else gets 404 or 405.

use {
    super::registry::KrabkaRecorder,
    crate::health::Health,
    std::{net::SocketAddr, sync::Arc, time::Duration},
    tokio::{
        io::{AsyncReadExt, AsyncWriteExt},
        net::{TcpListener, TcpStream},
    },
};

/// The largest request head read; a longer one is answered 431.
const MAX_HEAD: usize = 8 * 1024;
/// How long a client may take to send its request head.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// A running endpoint; dropping it stops the server and the heartbeat.
#[derive(Debug)]
pub struct Endpoint {
    /// The address actually bound.
    pub local_addr: SocketAddr,
    tasks: [tokio::task::JoinHandle<()>; 2],
}

impl Drop for Endpoint {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

/// Binds `address` and serves the three routes; also starts the heartbeat
/// ticker `/healthz` watches.
///
/// # Errors
///
/// The bind error.
pub async fn start(
    address: SocketAddr,
    recorder: &'static KrabkaRecorder,
    health: Arc<Health>,
) -> std::io::Result<Endpoint> {
    let listener = TcpListener::bind(address).await?;
    let local_addr = listener.local_addr()?;
    health.beat();
    let ticker_health = Arc::clone(&health);
    let ticker = tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tick.tick().await;
            ticker_health.beat();
        }
    });
    let server = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of file descriptors and the like: try again shortly.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let health = Arc::clone(&health);
            tokio::spawn(async move {
                if let Err(e) = serve(stream, recorder, &health).await {
                    tracing::debug!(error = %e, "metrics endpoint connection failed");
                }
            });
        }
    });
    Ok(Endpoint {
        local_addr,
        tasks: [ticker, server],
    })
}

/// One response: status line, content type and body.
struct Answer {
    status: &'static str,
    content_type: &'static str,
    body: String,
}

impl Answer {
    fn json(ok: bool, value: &impl serde::Serialize) -> Self {
        Self {
            status: if ok {
                "200 OK"
            } else {
                "503 Service Unavailable"
            },
            content_type: "application/json",
            body: serde_json::to_string(value).unwrap_or_default() + "\n",
        }
    }

    fn text(status: &'static str, body: &str) -> Self {
        Self {
            status,
            content_type: "text/plain; charset=utf-8",
            body: format!("{body}\n"),
        }
    }
}

/// What `path` answers.
fn route(path: &str, recorder: &KrabkaRecorder, health: &Health) -> Answer {
    match path {
        "/metrics" => Answer {
            status: "200 OK",
            content_type: "text/plain; version=0.0.4; charset=utf-8",
            body: recorder.render(),
        },
        "/healthz" => {
            let liveness = health.liveness();
            Answer::json(liveness.alive, &liveness)
        }
        "/readyz" => {
            let readiness = health.readiness();
            Answer::json(readiness.ready, &readiness)
        }
        _ => Answer::text(
            "404 Not Found",
            "not found: try /metrics, /healthz or /readyz",
        ),
    }
}

async fn serve(
    mut stream: TcpStream,
    recorder: &KrabkaRecorder,
    health: &Health,
) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    let complete = tokio::time::timeout(READ_TIMEOUT, async {
        loop {
            if head.windows(4).any(|w| w == b"\r\n\r\n") || head.len() > MAX_HEAD {
                return Ok::<bool, std::io::Error>(true);
            }
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                return Ok(false);
            }
            head.extend_from_slice(buf.get(..n).unwrap_or_default());
        }
    })
    .await;
    let answer = match complete {
        Err(_) | Ok(Ok(false)) => return Ok(()),
        Ok(Err(e)) => return Err(e),
        Ok(Ok(true)) if head.len() > MAX_HEAD => Answer::text(
            "431 Request Header Fields Too Large",
            "request head too large",
        ),
        Ok(Ok(true)) => {
            let text = String::from_utf8_lossy(&head);
            let mut words = text.lines().next().unwrap_or_default().split_whitespace();
            let method = words.next().unwrap_or_default();
            let target = words.next().unwrap_or_default();
            let path = target.split('?').next().unwrap_or_default();
            match method {
                "GET" | "HEAD" => {
                    let mut answer = route(path, recorder, health);
                    if method == "HEAD" {
                        answer.body.clear();
                    }
                    answer
                }
                _ => Answer::text("405 Method Not Allowed", "only GET and HEAD"),
            }
        }
    };
    let response = format!(
        "HTTP/1.1 {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        answer.status,
        answer.content_type,
        answer.body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.write_all(answer.body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use {super::*, assert2::check};

    async fn get(addr: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut out = Vec::new();
        // A reset after the answer (unread request bytes) still leaves the answer read.
        let _ = stream.read_to_end(&mut out).await;
        String::from_utf8_lossy(&out).into_owned()
    }

    #[tokio::test]
    async fn serves_metrics_probes_and_refuses_the_rest() {
        static RECORDER: std::sync::LazyLock<KrabkaRecorder> =
            std::sync::LazyLock::new(KrabkaRecorder::new);
        metrics::with_local_recorder(&*RECORDER, || {
            metrics::counter!("probe_test_total").increment(7);
        });
        let health = Arc::new(Health::new(false));
        let endpoint = start(
            "127.0.0.1:0".parse().unwrap(),
            &RECORDER,
            Arc::clone(&health),
        )
        .await
        .unwrap();
        let addr = endpoint.local_addr;

        let metrics = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        check!(metrics.starts_with("HTTP/1.1 200 OK\r\n"));
        check!(metrics.contains("probe_test_total 7\n"));

        let live = get(addr, "GET /healthz HTTP/1.1\r\n\r\n").await;
        check!(live.starts_with("HTTP/1.1 200 OK\r\n"));
        check!(live.contains("\"alive\":true"));

        let ready = get(addr, "GET /readyz HTTP/1.1\r\n\r\n").await;
        check!(ready.starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
        let body = ready.split("\r\n\r\n").nth(1).unwrap();
        let json: serde_json::Value = serde_json::from_str(body).unwrap();
        check!(json["ready"] == false);
        check!(json["not_ready"][0] == "logs");

        check!(
            get(addr, "GET /nope HTTP/1.1\r\n\r\n")
                .await
                .starts_with("HTTP/1.1 404")
        );
        check!(
            get(addr, "POST /metrics HTTP/1.1\r\n\r\n")
                .await
                .starts_with("HTTP/1.1 405")
        );
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_HEAD + 10));
        check!(get(addr, &long).await.starts_with("HTTP/1.1 431"));
    }
}
