//! A headless Chromium driven over the Chrome DevTools Protocol, for the dashboard's tests.
//!
//! Chromium speaks the protocol over a pipe (`--remote-debugging-pipe`: commands in on
//! file descriptor 3, answers and events out on 4, each message JSON ended by a NUL byte),
//! so the tests need no WebSocket client and no driver binary: a shell maps the child's
//! standard input and output onto 3 and 4. Console errors, uncaught exceptions and failed
//! loads are collected from the page's events as they come.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)] // each test file uses a part

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::server::{TempDir, fresh_dir};

/// Where Debian's `chromium` package puts the browser; `SLUICE_CHROMIUM` overrides it.
const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";

/// How long one protocol command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// One browser at a time per test process: two cores are shared by the whole suite.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// A running headless Chromium with one page, closed when dropped.
pub struct Browser {
    child: Child,
    input: ChildStdin,
    answers: Receiver<Value>,
    errors: Arc<Mutex<Vec<String>>>,
    next_id: u64,
    session: String,
    _profile: TempDir,
    _turn: MutexGuard<'static, ()>,
}

/// The browser's path, or a failure that says how to install it.
fn chromium() -> PathBuf {
    let path = PathBuf::from(std::env::var("SLUICE_CHROMIUM").unwrap_or_else(|_| DEFAULT_CHROMIUM.to_owned()));
    assert!(
        path.exists(),
        "{} is missing: the dashboard's browser tests need Chromium (Debian: `apt-get install chromium`; \
         scripts/test.sh installs it when run as root), or SLUICE_CHROMIUM set to a Chromium binary",
        path.display()
    );
    path
}

impl Browser {
    /// Starts Chromium headless (no sandbox, as in a container run as root) with a fresh
    /// profile and opens a blank page, `width` × `height` CSS pixels.
    pub fn launch(width: u32, height: u32) -> Browser {
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let profile = fresh_dir("chromium");
        let mut child = Command::new("sh")
            .args(["-c", r#"exec "$0" "$@" 3<&0 4>&1 0</dev/null 1>/dev/null"#])
            .arg(chromium())
            .args(["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"])
            .args(["--remote-debugging-pipe", "--no-first-run", "--no-default-browser-check"])
            .args(["--disable-extensions", "--disable-background-networking", "--disable-sync", "--mute-audio"])
            .arg(format!("--user-data-dir={}", profile.join("profile").display()))
            .arg(format!("--window-size={width},{height}"))
            .arg("about:blank")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(profile.join("chromium.log")).unwrap())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let (sender, answers) = channel();
        let errors = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&errors);
        let output = child.stdout.take().unwrap();
        std::thread::spawn(move || read_messages(BufReader::new(output), &sender, &sink));
        let mut browser = Browser {
            child,
            input,
            answers,
            errors,
            next_id: 0,
            session: String::new(),
            _profile: profile,
            _turn: turn,
        };
        browser.open_page(width, height);
        browser
    }

    fn open_page(&mut self, width: u32, height: u32) {
        let target = self.call("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].clone();
        let attached = self.call("Target.attachToTarget", json!({"targetId": target, "flatten": true}));
        self.session = attached["sessionId"].as_str().unwrap().to_owned();
        for domain in ["Runtime", "Log", "Page"] {
            self.call(&format!("{domain}.enable"), json!({}));
        }
        let metrics = json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false});
        self.call("Emulation.setDeviceMetricsOverride", metrics);
    }

    /// Sends one command to the page (the browser itself before a page is attached) and
    /// waits for its answer.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method});
        message["params"] = params;
        if !self.session.is_empty() {
            message["sessionId"] = json!(self.session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.input.write_all(&bytes).unwrap();
        self.input.flush().unwrap();
        let deadline = Instant::now() + COMMAND_TIMEOUT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.answers.recv_timeout(left) {
                Ok(answer) if answer["id"] == id => {
                    assert!(answer.get("error").is_none(), "{method} failed: {}", answer["error"]);
                    return answer["result"].clone();
                }
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => panic!("Chromium did not answer {method} within {COMMAND_TIMEOUT:?}"),
                Err(RecvTimeoutError::Disconnected) => panic!("Chromium exited while asked {method}"),
            }
        }
    }

    /// Loads `url` and waits until the page and everything it loads are in.
    pub fn navigate(&mut self, url: &str) {
        let answer = self.call("Page.navigate", json!({"url": url}));
        assert!(answer.get("errorText").is_none(), "cannot load {url}: {answer}");
        self.wait_for("document.readyState === 'complete'", "the page to load", Duration::from_secs(30));
    }

    /// Evaluates a JavaScript expression in the page (awaiting a promise) and returns its
    /// value; panics with the exception's text if it throws.
    pub fn eval(&mut self, expression: &str) -> Value {
        let params = json!({"expression": expression, "returnByValue": true, "awaitPromise": true});
        let answer = self.call("Runtime.evaluate", params);
        if let Some(details) = answer.get("exceptionDetails") {
            panic!("`{expression}` threw: {}", details["exception"]["description"].as_str().unwrap_or("?"));
        }
        answer["result"]["value"].clone()
    }

    /// Waits (at most `limit`) until the expression is true, polling the page.
    pub fn wait_for(&mut self, condition: &str, what: &str, limit: Duration) {
        if !self.poll(condition, limit) {
            panic!("waited {limit:?} for {what} (`{condition}`); errors: {:?}", self.errors());
        }
    }

    /// Polls the page (at most `limit`) until the expression is true; whether it became true.
    pub fn poll(&mut self, condition: &str, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.eval(condition) != json!(true) {
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    }

    /// Clicks the middle of the first element matching `selector` as a user would: the
    /// mouse pressed and released there.
    pub fn click(&mut self, selector: &str) {
        let expression = format!(
            "(() => {{ const e = document.querySelector({selector:?}); if (!e) return null; \
             e.scrollIntoView({{block: 'center'}}); const r = e.getBoundingClientRect(); \
             return [r.left + r.width / 2, r.top + r.height / 2]; }})()"
        );
        let point = self.eval(&expression);
        let (x, y) = (point[0].as_f64(), point[1].as_f64());
        let (Some(x), Some(y)) = (x, y) else { panic!("nothing matches {selector}") };
        self.click_at(x, y);
    }

    /// Presses and releases the left mouse button at (`x`, `y`) in CSS pixels of the viewport.
    pub fn click_at(&mut self, x: f64, y: f64) {
        for kind in ["mousePressed", "mouseReleased"] {
            let event = json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1});
            self.call("Input.dispatchMouseEvent", event);
        }
    }

    /// Saves the whole page as a PNG image at `path`.
    pub fn screenshot(&mut self, path: &Path) {
        let metrics = self.call("Page.getLayoutMetrics", json!({}));
        let size = &metrics["cssContentSize"];
        let clip = json!({"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1});
        let shot =
            self.call("Page.captureScreenshot", json!({"format": "png", "captureBeyondViewport": true, "clip": clip}));
        let png = decode_base64(shot["data"].as_str().unwrap());
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }

    /// Console errors, uncaught exceptions and failed loads seen so far.
    pub fn errors(&self) -> Vec<String> {
        self.errors.lock().unwrap().clone()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Reads NUL-ended messages: answers go to `answers`, the page's errors to `errors`.
fn read_messages(mut output: impl BufRead, answers: &Sender<Value>, errors: &Mutex<Vec<String>>) {
    let mut message = Vec::new();
    while output.read_until(0, &mut message).is_ok_and(|read| read > 0) {
        message.pop_if(|byte| *byte == 0);
        if let Ok(value) = serde_json::from_slice::<Value>(&message) {
            if value.get("id").is_some() {
                let _ = answers.send(value);
            } else if let Some(error) = page_error(&value) {
                errors.lock().unwrap().push(error);
            }
        }
        message.clear();
    }
}

/// The error an event reports, if it reports one.
fn page_error(event: &Value) -> Option<String> {
    let params = &event["params"];
    match event["method"].as_str()? {
        "Runtime.exceptionThrown" => {
            let details = &params["exceptionDetails"];
            let text = details["exception"]["description"].as_str().or(details["text"].as_str());
            Some(format!("uncaught: {}", text.unwrap_or("?")))
        }
        "Runtime.consoleAPICalled" if matches!(params["type"].as_str(), Some("error" | "assert")) => {
            let args: Vec<String> = params["args"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|arg| arg["value"].as_str().or(arg["description"].as_str()).unwrap_or("?").to_owned())
                .collect();
            Some(format!("console.error: {}", args.join(" ")))
        }
        "Log.entryAdded" if params["entry"]["level"] == "error" => {
            let entry = &params["entry"];
            Some(format!("{}: {} ({})", entry["source"], entry["text"], entry["url"]))
        }
        _ => None,
    }
}

/// Standard base64 (the screenshot's encoding), padding ignored.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |byte: u8| match byte {
        b'A'..=b'Z' => byte - b'A',
        b'a'..=b'z' => byte - b'a' + 26,
        b'0'..=b'9' => byte - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        other => panic!("not base64: {other}"),
    };
    let digits: Vec<u8> = text.bytes().filter(|byte| *byte != b'=').map(value).collect();
    let mut bytes = Vec::with_capacity(digits.len() * 3 / 4);
    for chunk in digits.chunks(4) {
        let bits =
            chunk.iter().enumerate().fold(0u32, |bits, (index, digit)| bits | u32::from(*digit) << (18 - 6 * index));
        bytes.extend_from_slice(&bits.to_be_bytes()[1..chunk.len()]);
    }
    bytes
}

/// Generous: a loaded two-core machine runs the whole suite beside the browser tests.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// `target/test-artifacts/ui/NAME`, next to the test binary's own target folder.
pub fn artifact(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    // target/<profile>/deps/<test binary>
    let target = exe.ancestors().nth(3).unwrap();
    let path = target.join("test-artifacts").join("ui").join(name);
    println!("screenshot: {}", path.display());
    path
}

/// Fails the test with the errors the page reported, if any.
pub fn assert_no_errors(browser: &Browser) {
    let errors = browser.errors();
    assert!(errors.is_empty(), "the page reported errors: {errors:#?}");
}
