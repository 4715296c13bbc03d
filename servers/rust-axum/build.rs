// Records the compiler and the locked crate versions for GET /health ("versions").
use std::{env, fs, process::Command};

fn main() {
    println!("cargo:rerun-if-changed=Cargo.lock");
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let version = Command::new(rustc)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.split_whitespace().nth(1).map(str::to_owned))
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=LAB_RUSTC_VERSION={version}");

    let lock = fs::read_to_string("Cargo.lock").unwrap_or_default();
    for krate in [
        "axum",
        "hyper",
        "tokio",
        "rusqlite",
        "libsqlite3-sys",
        "tokio-postgres",
        "deadpool-postgres",
    ] {
        let needle = format!("name = \"{krate}\"\nversion = \"");
        let v = lock
            .find(&needle)
            .map(|i| &lock[i + needle.len()..])
            .and_then(|rest| rest.split('"').next())
            .unwrap_or("unknown");
        let key = krate.to_uppercase().replace('-', "_");
        println!("cargo:rustc-env=LAB_VERSION_{key}={v}");
    }
}
