//! The service run in this process through [`crate::serve::run`]: listeners the test bound
//! on port 0, a configuration it parsed, and a shutdown it triggers.

use crate::config::service_file::ServiceConfig;
use crate::config::settings::{SettingFlags, Settings};
use crate::serve::start::{InitialConfig, Listeners};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// Anchored at the first request: the turn of an hour between the test's two requests
/// cannot empty the window.
const CONFIG: &str =
    "policies:\n  once:\n    algorithm: fixed_window\n    limit: 1\n    window: 1h\n    alignment: anchored\n";

/// Settings for a service on free ports, with no snapshot and one worker.
fn settings(config: &ServiceConfig) -> Settings {
    let flags = SettingFlags {
        http: Some("127.0.0.1:0".into()),
        grpc: Some("127.0.0.1:0".into()),
        snapshot: Some("off".into()),
        workers: Some(1),
        ..SettingFlags::default()
    };
    Settings::resolve(&flags, &config.server).expect("valid settings")
}

/// POSTs `body` to `path` over a new connection and returns the whole response.
async fn post(address: std::net::SocketAddr, path: &str, body: &str) -> String {
    let mut stream = TcpStream::connect(address).await.expect("the service accepts");
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: sluice\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write the request");
    let mut response = String::new();
    stream.read_to_string(&mut response).await.expect("read the response");
    response
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_serves_the_listeners_it_is_given_until_told_to_stop() {
    let config = ServiceConfig::parse(CONFIG).expect("valid configuration");
    let settings = settings(&config);
    let listeners = Listeners::bind(&settings).await.expect("free ports");
    let http = listeners.http.local_addr().expect("an address");
    let (stop, stopped) = oneshot::channel::<()>();
    let service = tokio::spawn(crate::serve::run(settings, InitialConfig::parsed(config), listeners, async {
        let _ = stopped.await;
    }));
    // The listener is bound already: a connection made before the workers are ready waits
    // in its backlog, and is served once they are.
    let check = r#"{"key":"user-1","policies":["once"]}"#;
    let first = post(http, "/v1/check", check).await;
    let second = post(http, "/v1/check", check).await;
    assert!(first.starts_with("HTTP/1.1 200") && first.contains(r#""allowed":true"#), "{first}");
    assert!(second.starts_with("HTTP/1.1 429") && second.contains(r#""allowed":false"#), "{second}");
    stop.send(()).expect("the service waits for the signal");
    service.await.expect("the service task").expect("the service stops cleanly");
    assert!(TcpStream::connect(http).await.is_err(), "the listener is closed once the service returns");
}
