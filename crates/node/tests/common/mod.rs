//! Helpers the node's end-to-end tests share.

use std::io::{Read, Write};
use std::net::SocketAddr;

/// The node's metrics page at `addr`, status line and all (a plain HTTP/1.0 GET).
pub async fn metrics_page(addr: SocketAddr) -> String {
    tokio::task::spawn_blocking(move || {
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        stream.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
        let mut body = String::new();
        stream.read_to_string(&mut body).unwrap();
        body
    })
    .await
    .unwrap()
}
