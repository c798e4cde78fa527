//! Shared by the integration tests: where the third-party corpus is.

use std::path::PathBuf;

/// `$MOTIOND_CORPUS`, else `../shared/corpus` beside the checkout. `None` when it is missing and
/// the run may skip; under `CI=true` a missing corpus fails the test instead of skipping it.
pub fn corpus() -> Option<PathBuf> {
    let dir = std::env::var_os("MOTIOND_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus"));
    if dir.is_dir() {
        return Some(dir);
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("corpus not found at {} (CI=true)", dir.display());
    }
    eprintln!("skipping: corpus not found at {}", dir.display());
    None
}
