//! No build of `forkless` a user makes can be told to lose data: the durable store's test
//! hooks (`fault-injection`: delivery before durability, an abort inside a sync) are turned on
//! only by this workspace's tests and benchmarks. Asked of cargo's own feature resolution for
//! a build without dev-dependencies (`cargo build --release`, `cargo install`), of this crate
//! and of the whole workspace; the positive control asks the same with the tests' edges and
//! must see the feature.

fn features_of_the_durable_store(args: &[&str]) -> String {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(["tree", "--offline", "--invert", "forkless-store-redb", "--format", "{p} [{f}]"])
        .args(args)
        .output()
        .expect("cargo tree runs");
    assert!(out.status.success(), "cargo tree: {}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    text.lines().next().expect("the store's line").to_owned()
}

#[test]
fn a_build_without_the_tests_has_no_fault_injection() {
    for scope in [&["--package", "forkless"][..], &["--workspace"][..]] {
        let line = features_of_the_durable_store(&[scope, &["--edges", "no-dev"]].concat());
        assert!(line.starts_with("forkless-store-redb "), "{line}");
        assert!(
            !line.contains("fault-injection"),
            "a release build carries the test hooks ({scope:?}): {line}"
        );
    }
}

#[test]
fn control_the_tests_build_has_it() {
    let line = features_of_the_durable_store(&["--package", "forkless"]);
    assert!(line.contains("fault-injection"), "the process tests need the hooks: {line}");
}
