//! Unit tests of `serve`.

use super::*;
use clap::Parser;
use core::time::Duration;

use forkless_core::{Config as CoreConfig, ResumeMode};
use forkless_server::{AllowedOrigins, AnswerMode};

use super::config::allowed_origins;

#[derive(Debug, Parser)]
struct Harness {
    #[command(flatten)]
    serve: ServeArgs,
}

fn parse(args: &[&str]) -> Result<ServeArgs, clap::Error> {
    Harness::try_parse_from(std::iter::once("serve").chain(args.iter().copied())).map(|h| h.serve)
}

#[test]
fn defaults_are_the_documented_ones() {
    let args = parse(&[]).expect("defaults parse");
    assert_eq!(args.listen, "127.0.0.1:8080".parse().expect("addr"));
    assert_eq!(args.store, StoreSpec::Redb(None));
    assert_eq!(args.durability(), Durability::Batched { window: Duration::from_millis(5) });
    assert_eq!(args.pipeline(), forkless_store::shared::Pipeline::On);
    let immediate = parse(&["--durability", "immediate"]).expect("parses");
    assert_eq!(immediate.pipeline(), forkless_store::shared::Pipeline::Off);
    assert_eq!(args.path, "/mcp");
    assert_eq!(args.answer, Answer::Sse);
    let config = args.server_config().expect("defaults are valid");
    assert_eq!(config.core, CoreConfig::default());
}

#[test]
fn store_spec_is_parsed_not_matched_loosely() {
    assert_eq!("memory".parse::<StoreSpec>(), Ok(StoreSpec::Memory));
    assert_eq!("redb".parse::<StoreSpec>(), Ok(StoreSpec::Redb(None)));
    assert_eq!("redb:/tmp/x".parse::<StoreSpec>(), Ok(StoreSpec::Redb(Some(PathBuf::from("/tmp/x")))));
    assert!(matches!("redb:".parse::<StoreSpec>(), Err(StoreSpecError::Unknown(_))));
    assert!(matches!("redis".parse::<StoreSpec>(), Err(StoreSpecError::Unknown(_))));
    assert_eq!("redis://:pw@h:6379/0".parse::<StoreSpec>().unwrap().to_string(), "redis://:***@h:6379/0");
    assert!(matches!("memory:x".parse::<StoreSpec>(), Err(StoreSpecError::Unknown(_))));
    assert!(matches!("postgres".parse::<StoreSpec>(), Err(StoreSpecError::Unknown(_))));
    let pg = "postgres://app:secret@db:5432/forkless".parse::<StoreSpec>().expect("a postgres URL");
    assert_eq!(pg, StoreSpec::Postgres("postgres://app:secret@db:5432/forkless".into()));
    assert_eq!(pg.to_string(), "postgres://app:***@db:5432/forkless", "the password never reaches a log");
    assert_eq!("postgresql://u@h/d".parse::<StoreSpec>().unwrap().to_string(), "postgresql://u@h/d");
    assert!(matches!("sqlite".parse::<StoreSpec>(), Err(StoreSpecError::Unknown(_))));
    assert!(parse(&["--store", "bogus"]).is_err());
}

#[test]
fn grace_above_retry_budget_is_a_config_error() {
    let args = parse(&["--grace", "60000"]).expect("flags parse");
    let err = args.server_config().expect_err("grace >= retry budget");
    assert!(matches!(err, Error::Config(_)), "{err}");
    assert_eq!(err.exit_code(), std::process::ExitCode::from(2));
}

#[test]
fn short_grace_shortens_keep_alive_with_it() {
    let args = parse(&["--grace", "900", "--strict"]).expect("flags parse");
    let config = args.server_config().expect("valid");
    assert_eq!(config.core.grace, Duration::from_millis(900));
    assert_eq!(config.core.keep_alive, Duration::from_millis(300));
    assert_eq!(config.core.mode, ResumeMode::Strict);
}

#[test]
fn flags_reach_the_server_config() {
    let args = parse(&[
        "--answer",
        "json",
        "--poll-after",
        "250",
        "--allowed-origin",
        "http://a.example",
        "--allowed-origin",
        "http://b.example",
        "--max-body-bytes",
        "1024",
        "--path",
        "/x",
    ])
    .expect("flags parse");
    let config = args.server_config().expect("valid");
    assert!(matches!(config.answer, AnswerMode::Json));
    assert_eq!(config.poll_after, Some(Duration::from_millis(250)));
    assert_eq!(
        config.allowed_origins,
        AllowedOrigins::List(vec!["http://a.example".to_owned(), "http://b.example".to_owned()])
    );
    assert_eq!(config.max_body_bytes, 1024);
    assert_eq!(config.path, "/x");
}

#[test]
fn origins_default_to_local_and_star_allows_any() {
    assert_eq!(allowed_origins(&[]), AllowedOrigins::Localhost);
    assert_eq!(allowed_origins(&["*".to_owned()]), AllowedOrigins::Any);
}

#[test]
fn bad_values_are_refused() {
    assert!(parse(&["--listen", "nowhere"]).is_err());
    assert!(parse(&["--answer", "xml"]).is_err());
    assert!(parse(&["--grace", "-1"]).is_err());
    let relative = parse(&["--path", "mcp"]).expect("flags parse");
    assert!(matches!(relative.server_config(), Err(Error::Config(_))));
    for zero in [["--max-body-bytes", "0"], ["--poll-after", "0"], ["--grace", "0"]] {
        let args = parse(&zero).expect("flags parse");
        assert!(matches!(args.server_config(), Err(Error::Config(_))), "{zero:?}");
    }
}

#[test]
fn advertise_is_a_plain_http_base_for_a_node() {
    let node = ["--store", "postgres://db/x", "--node-id", "a", "--advertise"];
    let with = |url: &str| parse(&[&node[..], &[url]].concat());
    assert!(with("http://10.0.0.1:8080").expect("parsed").server_config().is_ok());
    assert!(with("http://10.0.0.1:8080/").expect("parsed").server_config().is_ok());
    for bad in ["https://10.0.0.1:8080", "http://10.0.0.1", "http://10.0.0.1:8080/mcp", "10.0.0.1:8080"] {
        let refused = with(bad).expect_err(bad).to_string();
        assert!(refused.contains("--advertise") && refused.contains("http://HOST:PORT"), "{refused}");
    }
    // Only a node (with --node-id) advertises an address.
    assert!(parse(&["--advertise", "http://10.0.0.1:8080"]).is_err());
}
