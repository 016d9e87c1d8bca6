//! The smallest HTTP/1.1 application for a proxy to forward to: every request, whatever
//! its path, gets `200 ok`. Stopped when dropped.
#![allow(dead_code, clippy::unwrap_used)] // each test file uses a part

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// An application answering `200 ok` on a free loopback port.
#[derive(Debug)]
pub struct Upstream {
    pub address: SocketAddr,
    stopping: Arc<AtomicBool>,
}

impl Upstream {
    /// Starts the application on a free loopback port.
    pub fn start() -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let stopping = Arc::new(AtomicBool::new(false));
        let stop = Arc::clone(&stopping);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                if let Ok(stream) = stream {
                    std::thread::spawn(move || answer(stream));
                }
            }
        });
        Upstream { address, stopping }
    }
}

/// Answers each request of a keep-alive connection (requests without a body).
fn answer(stream: TcpStream) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        let mut head_ended = false;
        while reader.read_line(&mut line).is_ok_and(|read| read > 0) {
            if line == "\r\n" {
                head_ended = true;
                break;
            }
            line.clear();
        }
        if !head_ended || writer.write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok").is_err() {
            return;
        }
    }
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Relaxed);
        // Wakes the accept loop, which then sees it must stop.
        let _ = TcpStream::connect(self.address);
    }
}
