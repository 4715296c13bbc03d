//! delayproxy: a TCP proxy that delays every byte by a fixed time in each direction, in user
//! space, with microsecond precision (a thread per direction sleeps with nanosleep until each
//! chunk is due; Go's timers and Toxiproxy's latency toxic round anything under 1 ms up to ~1 ms).
//!
//!   delayproxy --listen 127.0.0.1:0 --upstream 127.0.0.1:8080 --delay-us 100 --ready FILE
//!
//! Every chunk read from one side is written to the other `delay-us` microseconds after it was
//! read (one-way propagation delay; no bandwidth limit, order kept). When it is ready it writes
//! its listening address to FILE. It exits when its standard input closes (its parent's stop),
//! writing its counters to FILE.stats first (and every half second before): connections, chunks
//! forwarded and how late each was written past its due time (mean and max µs), so the delay
//! actually applied is measured, not assumed.
use std::env;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

struct Stats {
    chunks: AtomicU64,
    late_sum_ns: AtomicU64,
    late_max_ns: AtomicU64,
    connections: AtomicU64,
}

fn pipe(mut from: TcpStream, mut to: TcpStream, delay: Duration, stats: Arc<Stats>) {
    let (tx, rx) = mpsc::channel::<Option<(Instant, Vec<u8>)>>();
    let mut to_close = to.try_clone().expect("clone");
    let from_close = from.try_clone().expect("clone");
    let st = stats.clone();
    let writer = thread::spawn(move || {
        for item in rx {
            match item {
                Some((due, buf)) => {
                    let now = Instant::now();
                    if due > now {
                        thread::sleep(due - now);
                    }
                    let late = Instant::now().saturating_duration_since(due).as_nanos() as u64;
                    st.chunks.fetch_add(1, Ordering::Relaxed);
                    st.late_sum_ns.fetch_add(late, Ordering::Relaxed);
                    st.late_max_ns.fetch_max(late, Ordering::Relaxed);
                    if to.write_all(&buf).is_err() {
                        let _ = from_close.shutdown(Shutdown::Both);
                        return;
                    }
                }
                None => {
                    let _ = to.shutdown(Shutdown::Write);
                    return;
                }
            }
        }
    });
    let mut buf = vec![0u8; 65536];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = tx.send(None);
                break;
            }
            Ok(n) => {
                if tx.send(Some((Instant::now() + delay, buf[..n].to_vec()))).is_err() {
                    break;
                }
            }
        }
    }
    let _ = writer.join();
    let _ = to_close.flush();
}

fn write_stats(path: &str, stats: &Stats, delay_us: u64) {
    let chunks = stats.chunks.load(Ordering::Relaxed);
    let sum = stats.late_sum_ns.load(Ordering::Relaxed);
    let body = format!(
        "{{\"delay_us\": {}, \"connections\": {}, \"chunks\": {}, \"late_mean_us\": {:.3}, \"late_max_us\": {:.3}}}\n",
        delay_us,
        stats.connections.load(Ordering::Relaxed),
        chunks,
        if chunks > 0 { sum as f64 / chunks as f64 / 1000.0 } else { 0.0 },
        stats.late_max_ns.load(Ordering::Relaxed) as f64 / 1000.0
    );
    let tmp = format!("{path}.tmp");
    if std::fs::write(&tmp, body).is_ok() {
        let _ = std::fs::rename(&tmp, path);
    }
}

fn main() {
    let args: Vec<String> = env::args().collect();
    let get = |name: &str| -> Option<String> {
        args.iter().position(|a| a == name).and_then(|i| args.get(i + 1).cloned())
    };
    let usage = "usage: delayproxy --listen ADDR --upstream ADDR --delay-us N [--ready FILE]";
    let (Some(listen), Some(upstream), Some(delay)) = (get("--listen"), get("--upstream"), get("--delay-us")) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let delay_us: u64 = match delay.parse() {
        Ok(v) if v <= 10_000_000 => v,
        _ => {
            eprintln!("delayproxy: --delay-us must be 0..10000000 microseconds, not {delay:?}");
            std::process::exit(2);
        }
    };
    let listener = TcpListener::bind(&listen).unwrap_or_else(|e| {
        eprintln!("delayproxy: cannot listen on {listen}: {e}");
        std::process::exit(1);
    });
    let stats = Arc::new(Stats {
        chunks: AtomicU64::new(0),
        late_sum_ns: AtomicU64::new(0),
        late_max_ns: AtomicU64::new(0),
        connections: AtomicU64::new(0),
    });
    if let Some(ready) = get("--ready") {
        let addr = listener.local_addr().expect("local addr");
        let tmp = format!("{ready}.tmp");
        std::fs::write(&tmp, format!("{addr}\n")).expect("ready file");
        std::fs::rename(&tmp, &ready).expect("ready file");
        let st = stats.clone();
        let path = format!("{ready}.stats");
        thread::spawn(move || loop {
            write_stats(&path, &st, delay_us);
            thread::sleep(Duration::from_millis(500));
        });
        let st = stats.clone();
        let path = format!("{ready}.stats");
        thread::spawn(move || {
            let mut sink = Vec::new();
            let _ = std::io::stdin().read_to_end(&mut sink); // until the parent closes it
            write_stats(&path, &st, delay_us);
            std::process::exit(0);
        });
    }
    let delay = Duration::from_micros(delay_us);
    for conn in listener.incoming() {
        let Ok(client) = conn else { continue };
        let upstream = upstream.clone();
        let stats = stats.clone();
        thread::spawn(move || {
            let Ok(server) = TcpStream::connect(&upstream) else {
                let _ = client.shutdown(Shutdown::Both);
                return;
            };
            let _ = client.set_nodelay(true);
            let _ = server.set_nodelay(true);
            stats.connections.fetch_add(1, Ordering::Relaxed);
            let (c2, s2) = (client.try_clone().expect("clone"), server.try_clone().expect("clone"));
            let st = stats.clone();
            let up = thread::spawn(move || pipe(c2, s2, delay, st));
            pipe(server, client, delay, stats);
            let _ = up.join();
        });
    }
}
